"""One notification's or one user's history as a PDF (WeasyPrint, ``campaigns/pdf.py``: fonts only, no fetch).

Arabic and Persian are shaped and set right to left: each text carries ``dir`` by its first
strong character (``campaigns.report.first_strong_direction``) and the page is set in DejaVu Sans,
whose Arabic glyphs WeasyPrint embeds. Contact data is masked, as in the explorer's lists.
"""

from dataclasses import dataclass

from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from backend.notifications.masking import mask_email, mask_phone
from backend.notifications.models import Attempt, Notification, Recipient
from backend.support import trail
from campaigns.report import FONTS, first_strong_direction

# The newest notifications a user's PDF lists, with their trails and attempts.
USER_HISTORY = 100


@dataclass(frozen=True)
class Entry:
    """One notification in a PDF: its trail and attempts, and the direction of its preview."""

    notification: Notification
    steps: list[trail.Step]
    attempts: list[Attempt]
    direction: str


def _entries(notifications: list[Notification]) -> list[Entry]:
    return [Entry(n, trail.trail(n), list(n.attempts.all()), first_strong_direction(n.preview)) for n in notifications]


def _rows():
    # The history and attempts of every notification in two queries, not two per notification.
    return Notification.objects.select_related(
        "recipient", "kind", "client", "digest", "template_version"
    ).prefetch_related("state_changes", "attempts")


def _render(title: str, recipient: Recipient, entries: list[Entry], filename: str) -> HttpResponse:
    from campaigns import pdf  # WeasyPrint: imported by the first PDF only (campaigns/pdf.py)

    html = render_to_string(
        "support/history.html",
        {
            "title": title, "recipient": recipient, "entries": entries, "fonts": FONTS,
            "phone": mask_phone(recipient.phone), "email": mask_email(recipient.email),
            "generated_at": timezone.now(),
        },
    )  # fmt: skip
    response = HttpResponse(pdf.write_pdf(html, FONTS.values()), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    add_never_cache_headers(response)
    return response


def notification_pdf(notification: Notification) -> HttpResponse:
    """The history of one notification as a PDF download, ``notification-<id>.pdf``."""
    notification = _rows().get(pk=notification.pk)
    return _render(
        f"Notification {notification.pk}", notification.recipient, _entries([notification]),
        f"notification-{notification.pk}.pdf",
    )  # fmt: skip


def user_pdf(recipient: Recipient) -> HttpResponse:
    """The newest ``USER_HISTORY`` notifications of one user as a PDF download, ``user-<id>.pdf``."""
    notifications = list(_rows().filter(recipient=recipient).order_by("-created_at", "-id")[:USER_HISTORY])
    safe_id = "".join(c if c.isalnum() or c in "-_." else "_" for c in recipient.user_id)
    return _render(f"User {recipient.user_id}", recipient, _entries(notifications), f"user-{safe_id}.pdf")
