"""Erasing a user's record on request (GDPR Art. 17): ``DELETE /api/v1/users/{user_id}``.

Everything the platform holds about the person goes, in one transaction: the contact data, push
devices, preferences, in-app inbox, segment memberships and unsubscribe links (with the recipient
row), and every notification sent or waiting for them, with its history, attempts, delivery receipts
and dead letter (``retention.delete_notifications``: one statement a table). A queued or scheduled notification is
never sent: its row is gone, and its task, when it comes, finds nothing to deliver. Left are the
``Erasure`` row, which names nobody (``Erasure.digest_of``), and the support explorer's reveal
audit, whose rows keep the user id an agent looked at: the record of what staff saw.

A notification being handed to a provider at that moment (``sending``) cannot be unsent: the
erasure is refused (``ErasureRefused``, a 409) until its call has answered, within seconds. Only a
client the administrator made ``may_erase`` may ask (``api/views.py``): an erasure takes every
client's notifications to the person with it.
The same user id may be created again afterwards (``PUT``): a new record, with none of the old one.
A campaign's counts lose the erased person's row until it is archived; an archived one keeps its
frozen figures, which count people, never name them.
"""

from dataclasses import dataclass

from django.db import IntegrityError, transaction

from backend.notifications import retention
from backend.notifications.models import DeadLetter, Device, Erasure, Notification, Preference, Recipient, State
from campaigns.models import SegmentMember
from inbox import events as inbox_events
from inbox.models import InboxMessage


class ErasureRefused(Exception):
    """The record cannot be erased right now; the message says why and when to try again."""


@dataclass(frozen=True)
class Erased:
    """What an erasure deleted: the ``Erasure`` row recording it (its counts)."""

    record: Erasure


def erase(user_id: str, *, by: str) -> Erased | None:
    """Erase the record of ``user_id`` and everything held about them; None when there is no such user.

    ``by`` says who asked (``actions.by_api_client``). Raises ``ErasureRefused`` while a notification
    to them is ``sending``, or when a send to them committed during the erasure (try again: it is
    erased with the rest). Rows are locked in the order every other writer takes them (dead letters,
    then notifications, then the recipient; a replay, a receipt and a reveal wait, then find them
    gone), so a worker's claim either committed before the check (409) or waits and then claims nothing.
    """
    try:
        with transaction.atomic():
            return _erase(user_id, by)
    except IntegrityError:
        # A send read the user before the erasure and inserted its row meanwhile (the foreign key, at commit).
        raise ErasureRefused(
            "A notification to this user was accepted while the record was being erased; nothing was erased. "
            "Try again: it is erased with the rest."
        ) from None


def _erase(user_id: str, by: str) -> Erased | None:
    recipient_pk = Recipient.objects.filter(user_id=user_id).values_list("pk", flat=True).first()
    if recipient_pk is None:
        return None
    notifications = Notification.objects.filter(recipient_id=recipient_pk)
    list(DeadLetter.objects.select_for_update().filter(notification_id__in=notifications.values("pk")).values("pk"))
    states = dict(notifications.select_for_update().values_list("pk", "state"))
    if State.SENDING in states.values():
        raise ErasureRefused(
            "A notification to this user is being handed to a provider right now; try again in a few seconds."
        )
    recipient = Recipient.objects.select_for_update().filter(pk=recipient_pk).first()
    if recipient is None:
        return None
    record = Erasure(
        user_id_digest=Erasure.digest_of(user_id),
        requested_by=by[:150],
        notifications=len(states),
        devices=Device.objects.filter(recipient=recipient).count(),
        preferences=Preference.objects.filter(recipient=recipient).count(),
        inbox_messages=InboxMessage.objects.filter(recipient=recipient).count(),
        segment_memberships=SegmentMember.objects.filter(recipient=recipient).count(),
    )
    if states:
        retention.delete_notifications(list(states))
    recipient.delete()
    record.save()
    # Sockets open on the inbox close: a record made later for the same user id is someone else's.
    transaction.on_commit(lambda: inbox_events.publish(user_id, inbox_events.gone_event(recipient_pk)))
    return Erased(record)
