"""Read side of the inbox: pages, catch-up after an id, the unread count.

Every function takes the recipient's primary key (resolved once per socket or
request) and returns messages in ascending id order, the order of the
protocol; screens that show newest first reverse them.
"""

from dataclasses import dataclass

from django.db.models import Max

from backend.notifications.models import Recipient
from inbox.events import MessageDict, message_payload
from inbox.models import InboxMessage

PAGE_SIZE = 20  # messages in a page when the client names no limit
MAX_PAGE = 100  # the most one request or one sync reply returns
# The inbox page's filters: its messages not archived (the inbox), the unread ones of those, the archived ones.
FILTERS = ("all", "unread", "archived")


@dataclass(frozen=True)
class Page:
    """Messages in ascending id order; ``more``: further messages exist past this page's edge."""

    messages: list[InboxMessage]
    more: bool

    def payload(self) -> list[MessageDict]:
        return [message_payload(message) for message in self.messages]


def recipient_pk(user_id: str) -> int | None:
    return Recipient.objects.filter(user_id=user_id).values_list("pk", flat=True).first()


def unread_count(recipient: int) -> int:
    """Unread, unarchived messages (the badge); served by the partial index ``inbox_unread_idx``."""
    return InboxMessage.objects.filter(recipient_id=recipient, read_at=None, archived_at=None).count()


def last_id(recipient: int) -> int:
    """The person's newest message id (archived ones too), 0 when the inbox is empty."""
    return InboxMessage.objects.filter(recipient_id=recipient).aggregate(last=Max("id"))["last"] or 0


def latest(recipient: int, limit: int = PAGE_SIZE, before: int | None = None) -> Page:
    """The newest ``limit`` unarchived messages (older than id ``before`` when given); ``more``: older exist."""
    rows = InboxMessage.objects.filter(recipient_id=recipient, archived_at=None)
    if before is not None:
        rows = rows.filter(id__lt=before)
    found = list(rows.order_by("-id")[: limit + 1])
    return Page(messages=found[:limit][::-1], more=len(found) > limit)


def shown(recipient: int, show: str, limit: int = PAGE_SIZE) -> list[InboxMessage]:
    """The newest ``limit`` messages of one of the page's ``FILTERS``, newest first (one query, by id)."""
    rows = InboxMessage.objects.filter(recipient_id=recipient)
    if show == "archived":
        rows = rows.filter(archived_at__isnull=False)
    else:
        rows = rows.filter(archived_at=None, **({"read_at": None} if show == "unread" else {}))
    return list(rows.order_by("-id")[:limit])


def after(recipient: int, after_id: int, limit: int = MAX_PAGE) -> Page:
    """Every message with an id above ``after_id``, archived ones included, oldest first.

    This is the catch-up of ``sync``, of the socket's poll and of a gap in the
    events, one code path for all three. ``more``: repeat with the last id.
    """
    found = list(InboxMessage.objects.filter(recipient_id=recipient, id__gt=after_id).order_by("id")[: limit + 1])
    return Page(messages=found[:limit], more=len(found) > limit)


def get(recipient: int, message_id: int) -> InboxMessage | None:
    """One of the person's messages; None for an unknown id or someone else's."""
    return InboxMessage.objects.filter(recipient_id=recipient, pk=message_id).first()
