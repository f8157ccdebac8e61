"""Erasing a user's record on request (GDPR Art. 17): ``DELETE /api/v1/users/{user_id}``.

Everything the platform holds about the person goes, in one transaction: the contact data, push
devices, preferences, in-app inbox, segment memberships and unsubscribe links (with the recipient
row), and every notification sent or waiting for them, with its history, attempts, delivery receipts
and dead letter (``retention.delete_notifications``: one statement a table). A queued or scheduled notification is
never sent: its row is gone, and its task, when it comes, finds nothing to deliver. Left are the
``Erasure`` row, which names nobody (``Erasure.digest_of``), and the support explorer's reveal
audit, whose rows keep the user id an agent looked at: the record of what staff saw.

A notification being handed to a provider at that moment (``sending``) cannot be unsent: the
erasure is refused (``ErasureRefused``, a 409) until its call has answered, within seconds.
The same user id may be created again afterwards (``PUT``): a new record, with none of the old one.
A campaign's counts lose the erased person's row until it is archived; an archived one keeps its
frozen figures, which count people, never name them.
"""

from dataclasses import dataclass

from django.db import transaction

from backend.notifications import retention
from backend.notifications.models import Device, Erasure, Notification, Preference, Recipient, State
from campaigns.models import SegmentMember
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
    to them is ``sending``. The recipient row is locked first, so a send accepted meanwhile either
    committed before (and is erased with the rest) or waits and then finds no such user.
    """
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().filter(user_id=user_id).first()
        if recipient is None:
            return None
        notifications = Notification.objects.filter(recipient=recipient)
        if notifications.filter(state=State.SENDING).exists():
            raise ErasureRefused(
                "A notification to this user is being handed to a provider right now; try again in a few seconds."
            )
        ids = list(notifications.values_list("pk", flat=True))
        record = Erasure(
            user_id_digest=Erasure.digest_of(user_id),
            requested_by=by[:150],
            notifications=len(ids),
            devices=Device.objects.filter(recipient=recipient).count(),
            preferences=Preference.objects.filter(recipient=recipient).count(),
            inbox_messages=InboxMessage.objects.filter(recipient=recipient).count(),
            segment_memberships=SegmentMember.objects.filter(recipient=recipient).count(),
        )
        if ids:
            retention.delete_notifications(ids)
        recipient.delete()
        record.save()
    return Erased(record)
