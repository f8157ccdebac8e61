"""Every change to an inbox: deliver, mark read, mark all read, archive.

Each runs in one transaction that first locks the person's ``Recipient`` row
(``SELECT … FOR NO KEY UPDATE``: it does not block the foreign-key checks of
other inserts). The lock serializes one person's inbox writes, which buys two
guarantees the protocol relies on:

* a person's message ids grow in commit order, so "every message after id N"
  never skips a row that committed late;
* the unread count sent with each event is exact as of that commit.

Events are published on commit (``events.publish``), never before: a socket
must not hear of a row it cannot read yet. SQLite ignores the lock and
serializes every writer anyway (``transaction_mode=IMMEDIATE`` in settings).
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from backend.notifications.models import Recipient
from inbox import events, queries
from inbox.models import InboxMessage


class UnknownUser(LookupError):
    """No recipient has this user id."""


class MessageNotFound(LookupError):
    """The id names no message of this person (unknown, or someone else's)."""


@dataclass(frozen=True)
class NewMessage:
    """What the ``inapp`` provider delivers: already rendered, link already checked.

    ``notification_id`` is None for a template test sent to a staff member's inbox (no notification exists).
    """

    notification_id: str | None
    user_id: str
    kind: str
    language: str
    title: str
    body: str
    link: str = ""


@dataclass(frozen=True)
class Change:
    """The outcome of a read/archive command. ``ids``: what it changed (empty: nothing to do)."""

    ids: list[int]
    at: datetime
    unread: int


def _lock(user_id: str, record: int | None = None) -> Recipient:
    """The person's record, locked; ``UnknownUser`` when there is none, or it is not ``record`` (a pk).

    A socket opened before an erasure names its record: a record made since for the same user id is
    someone else's, and the socket's commands must not touch it.
    """
    recipient = Recipient.objects.select_for_update(no_key=True).only("pk", "user_id").filter(user_id=user_id).first()
    if recipient is None or (record is not None and recipient.pk != record):
        raise UnknownUser(user_id)
    return recipient


def deliver(new: NewMessage) -> tuple[InboxMessage, bool]:
    """Store ``new`` in its person's inbox and announce it on commit; returns (message, created).

    Idempotent by notification: a retry of a delivery whose row committed gets
    the same message back (``created=False``) and announces nothing again.
    Raises ``UnknownUser``.
    """
    with transaction.atomic():
        recipient = _lock(new.user_id)
        existing = new.notification_id and InboxMessage.objects.filter(notification_id=new.notification_id).first()
        if existing:
            return existing, False
        prev = queries.last_id(recipient.pk)
        message = InboxMessage.objects.create(
            recipient=recipient,
            notification_id=new.notification_id,
            kind=new.kind,
            language=new.language,
            title=new.title,
            body=new.body,
            link=new.link,
        )
        event = events.new_event(message, prev=prev, unread=queries.unread_count(recipient.pk))
        transaction.on_commit(lambda: events.publish(new.user_id, event))
    return message, True


def _announce(user_id: str, change: str, ids: list[int], at: datetime, recipient: Recipient) -> Change:
    unread = queries.unread_count(recipient.pk)
    if ids:
        event = events.change_event(recipient.pk, change, ids, at, unread)
        transaction.on_commit(lambda: events.publish(user_id, event))
    return Change(ids=ids, at=at, unread=unread)


def mark_read(user_id: str, message_id: int, record: int | None = None) -> tuple[InboxMessage, Change]:
    """Mark one message read (a no-op when it already is). Raises ``UnknownUser``, ``MessageNotFound``.

    ``record``: the recipient pk the caller knows the person by (a socket's), refused if no longer theirs.
    """
    now = timezone.now()
    with transaction.atomic():
        recipient = _lock(user_id, record)
        changed = InboxMessage.objects.filter(recipient=recipient, pk=message_id, read_at=None).update(read_at=now)
        message = queries.get(recipient.pk, message_id)
        if message is None:
            raise MessageNotFound(message_id)
        return message, _announce(user_id, "read", [message_id] if changed else [], now, recipient)


def mark_all_read(user_id: str, through: int | None = None, record: int | None = None) -> Change:
    """Mark every unread message read, or only those up to id ``through``.

    ``through`` is the newest id the person has seen: a message that arrives
    while they click "mark all read" stays unread. Raises ``UnknownUser``; ``record`` as for ``mark_read``.
    """
    now = timezone.now()
    with transaction.atomic():
        recipient = _lock(user_id, record)
        unread = InboxMessage.objects.filter(recipient=recipient, read_at=None)
        if through is not None:
            unread = unread.filter(pk__lte=through)
        ids = sorted(unread.values_list("pk", flat=True))
        InboxMessage.objects.filter(pk__in=ids).update(read_at=now)
        return _announce(user_id, "read", ids, now, recipient)


def archive(user_id: str, message_id: int, record: int | None = None) -> tuple[InboxMessage, Change]:
    """Archive one message (a no-op when it already is). Raises ``UnknownUser``, ``MessageNotFound``;
    ``record`` as for ``mark_read``."""
    now = timezone.now()
    with transaction.atomic():
        recipient = _lock(user_id, record)
        changed = InboxMessage.objects.filter(recipient=recipient, pk=message_id, archived_at=None).update(
            archived_at=now
        )
        message = queries.get(recipient.pk, message_id)
        if message is None:
            raise MessageNotFound(message_id)
        return message, _announce(user_id, "archived", [message_id] if changed else [], now, recipient)
