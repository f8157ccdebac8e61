"""The current search as CSV, streamed: rows are read a keyset page at a time and written as they come.

Contact data stays masked in the file (``masking.mask_phone`` / ``mask_email``): a file leaves the
audit's sight, so revealing stays a per-record act on the page.
"""

import csv
from collections.abc import Iterator

from backend.notifications.masking import mask_email, mask_phone
from backend.support import search

COLUMNS = ("created_at", "id", "user_id", "phone", "email", "kind", "channel", "priority", "state", "reason",
           "provider", "provider_ref", "attempts", "sent_at", "preview")  # fmt: skip


class _Line:
    """A file-like object whose ``write`` returns what it was given (csv.writer → one line at a time)."""

    def write(self, value: str) -> str:
        return value


def csv_lines(lookup: search.Lookup, filters: search.Filters) -> Iterator[str]:
    """The header, then one CSV line per notification of the search, in its order (``Lookup.order``)."""
    writer = csv.writer(_Line())
    yield writer.writerow(COLUMNS)
    for row in search.each_row(lookup, filters):
        recipient = row.recipient
        yield writer.writerow(
            [row.created_at.isoformat(), row.pk, _safe(recipient.user_id), mask_phone(recipient.phone),
             mask_email(recipient.email), row.kind.name, row.channel, row.priority, row.state, _safe(row.reason),
             row.provider, _safe(row.provider_ref), row.attempt_count, row.sent_at.isoformat() if row.sent_at else "",
             _safe(row.preview)]
        )  # fmt: skip


def _safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (OWASP "CSV injection").

    For every cell others wrote: the preview, the user id a client chose, a provider's reference and reason.
    """
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
