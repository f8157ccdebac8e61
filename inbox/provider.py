"""The ``inapp`` provider: delivering writes the message into the person's inbox.

It is "sent" when the row is committed; the sockets of that person hear of it
right after (``actions.deliver`` publishes on commit). A retry of the same
notification finds the message it already wrote, so the inbox never shows a
notification twice, whatever the queue redelivers.
"""

import logging

import ada_url
from django.db import DatabaseError

from backend.notifications.models import Notification
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register
from inbox import actions
from inbox.models import InboxMessage

logger = logging.getLogger(__name__)

_TITLE_MAX = InboxMessage._meta.get_field("title").max_length
_LINK_MAX = InboxMessage._meta.get_field("link").max_length
# The origin site paths are resolved against. Any http(s) origin gives the same verdict: for a
# special-scheme base, a reference without a scheme resolves the same way whatever the base's host.
_SITE = "https://site.invalid"
# What the URL parser trims from both ends before anything else (WHATWG URL, basic URL parser step 1).
_C0_CONTROL_OR_SPACE = "".join(map(chr, range(0x21)))


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
    """The link as it will be stored and shown: an http(s) URL or a site path, else "".

    A link becomes ``<a href>`` in people's browsers, so it is judged the way
    a browser parses it (the WHATWG URL Standard, by ada-url), not by
    urllib: tabs and newlines are removed, leading and trailing C0 controls
    and spaces are trimmed, a backslash is a slash in http(s) URLs, so
    ``/\\evil.example`` and ``/<TAB>/evil.example`` are ``//evil.example`` and leave
    the site. Kept:

    - an absolute http(s) URL without credentials (``https://good@evil`` shows
      one host and opens another), stored as the browser will serialize it;
    - a site path (starting with "/") whose resolution against the site's
      origin keeps that origin, stored as its path, query and fragment
      (``/%5Cevil.example`` is a path on the site).

    ``javascript:``, ``data:`` and every other scheme, scheme-relative
    ``//host`` and paths that resolve off-site are dropped (and logged).
    """
    if not isinstance(value, str) or not value or len(value) > _LINK_MAX:
        return ""
    link = _absolute_link(value) if ada_url.check_url(value) else _site_path(value)
    if not link or len(link) > _LINK_MAX:
        logger.warning("inbox: dropped a link that is neither http(s) nor a site path: %r", value[:100])
        return ""
    return link


def _absolute_link(value: str) -> str:
    url = ada_url.URL(value)
    if url.protocol not in ("http:", "https:") or url.username or url.password:
        return ""
    return url.href


def _site_path(value: str) -> str:
    if not value.lstrip(_C0_CONTROL_OR_SPACE).startswith("/"):
        return ""
    try:
        url = ada_url.URL(value, _SITE)
    except ValueError:  # an invalid host after the slashes, e.g. "/\\[" (a backslash, then "[")
        return ""
    path = url.pathname + url.search + url.hash
    # "/.//x" resolves to the path "//x": stored bare, it would be a scheme-relative link.
    if url.origin != _SITE or path.startswith("//"):
        return ""
    return path


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
