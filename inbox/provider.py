"""The ``inapp`` provider: delivering writes the message into the person's inbox.

It is "sent" when the row is committed; the sockets of that person hear of it
right after (``actions.deliver`` publishes on commit). A retry of the same
notification finds the message it already wrote, so the inbox never shows a
notification twice, whatever the queue redelivers.
"""

import logging
from urllib.parse import urlsplit

from django.db import DatabaseError

from backend.notifications.models import Notification
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register
from inbox import actions
from inbox.models import InboxMessage

logger = logging.getLogger(__name__)

_TITLE_MAX = InboxMessage._meta.get_field("title").max_length
_LINK_MAX = InboxMessage._meta.get_field("link").max_length


def title_and_body(subject: str, text: str) -> tuple[str, str]:
    """The rendered subject as title and the text as body; without a subject the
    text's first line is the title and the rest the body (not shown twice).

    A title longer than the column ends in "…".
    """
    title, body = subject.strip(), text.strip()
    if not title:
        title, _, body = body.partition("\n")
        title, body = title.strip(), body.strip()
    if len(title) > _TITLE_MAX:
        title = title[: _TITLE_MAX - 1] + "…"
    return title, body


def safe_link(value: object) -> str:
    """``value`` when it is an http(s) URL or a site path (``/orders/5012``), else "".

    A link is rendered as ``<a href>`` in people's browsers: ``javascript:``,
    ``data:`` and protocol-relative ``//host`` links would run or leave the
    site unannounced, so they are dropped (and logged), never stored.
    """
    if not isinstance(value, str) or not value or len(value) > _LINK_MAX:
        return ""
    link = value.strip()
    parts = urlsplit(link)
    if parts.scheme in ("http", "https") and parts.netloc:
        return link
    if not parts.scheme and not parts.netloc and link.startswith("/") and not link.startswith("//"):
        return link
    logger.warning("inbox: dropped a link that is neither http(s) nor a site path: %r", link[:100])
    return ""


@register
class InAppProvider(Provider):
    name = "inapp"
    channel = "inapp"

    def send(self, message: OutboundMessage) -> str:
        """Store the message; returns ``inbox:<message id>``.

        Raises ``ProviderError`` — permanent when the notification or its user
        is gone, transient when the database failed (the engine retries).
        """
        try:
            stored, _ = actions.deliver(self._new_message(message))
        except (Notification.DoesNotExist, actions.UnknownUser) as exc:
            raise ProviderError(f"inbox: no such notification or user ({exc})", permanent=True) from exc
        except DatabaseError as exc:
            raise ProviderError(f"inbox: database error: {exc}", permanent=False) from exc
        return f"inbox:{stored.pk}"

    @staticmethod
    def _new_message(message: OutboundMessage) -> actions.NewMessage:
        # The caller's kind, params and user live on the notification row, not
        # in the provider contract (OutboundMessage); one indexed read.
        notification = Notification.objects.select_related("kind", "recipient").get(pk=message.notification_id)
        title, body = title_and_body(message.subject, message.text)
        return actions.NewMessage(
            notification_id=message.notification_id,
            user_id=notification.recipient.user_id,
            kind=notification.kind.name,
            language=message.language,
            title=title,
            body=body,
            link=safe_link((notification.params or {}).get("link")),
        )
