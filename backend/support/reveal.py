"""Revealing a masked phone number or email address: the audit row first, then the value."""

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction

from backend.notifications.models import Notification, Recipient
from backend.support.models import ContactReveal

REVEAL = "support.reveal_contact"


@transaction.atomic
def reveal(user: AbstractBaseUser, recipient: Recipient, field: str, notification: Notification | None = None) -> str:
    """The clear ``field`` ("phone" or "email") of ``recipient``, after writing who asked, when and for which record.

    Raises ``PermissionDenied`` without the ``support.reveal_contact`` permission (the superuser has
    it too, and is audited like anyone) and ``ValueError`` for another field.
    """
    if field not in ContactReveal.Field.values:
        raise ValueError(f"Only a phone number or an email address can be revealed, not {field!r}.")
    if not user.has_perm(REVEAL):
        raise PermissionDenied
    # Retention may be deleting that notification at this moment: the reveal is then audited against the person alone.
    if notification is not None and not Notification.hold(notification.pk):
        notification = None
    ContactReveal.objects.create(
        user=user, username=user.get_username(), recipient=recipient, recipient_user_id=recipient.user_id,
        field=field, notification=notification,
    )  # fmt: skip
    return getattr(recipient, field)
