"""The current search as CSV, streamed: rows are read a keyset page at a time and written as they come.

Contact data stays masked in the file (``masking.mask_phone`` / ``mask_email``): a file leaves the
audit's sight, so revealing stays a per-record act on the page.
"""

import csv
from collections.abc import Iterator

from backend.notifications.masking import mask_email, mask_phone
from backend.spreadsheet import BOM, QUOTING, spreadsheet_text
from backend.support import search

COLUMNS = ("created_at", "id", "user_id", "phone", "email", "kind", "channel", "priority", "state", "reason",
           "provider", "provider_ref", "attempts", "sent_at", "preview")  # fmt: skip


class _Line:
    """A file-like object whose ``write`` returns what it was given (csv.writer → one line at a time)."""

    def write(self, value: str) -> str:
        return value


def csv_lines(lookup: search.Lookup, filters: search.Filters) -> Iterator[str]:
    """The header (after ``spreadsheet.BOM``), then one CSV line per notification of the search, in its order.

    ``Lookup.order``; every text cell through ``spreadsheet_text`` (a masked phone starts with ``+``).
    """
    writer = csv.writer(_Line(), quoting=QUOTING)
    yield BOM + writer.writerow(COLUMNS)
    for row in search.each_row(lookup, filters):
        recipient = row.recipient
        cells = [row.created_at.isoformat(), row.pk, recipient.user_id, mask_phone(recipient.phone),
                 mask_email(recipient.email), row.kind.name, row.channel, row.priority, row.state, row.reason,
                 row.provider, row.provider_ref, row.attempt_count, row.sent_at.isoformat() if row.sent_at else "",
                 row.preview]  # fmt: skip
        yield writer.writerow([spreadsheet_text(cell) if isinstance(cell, str) else cell for cell in cells])
