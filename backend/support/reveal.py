"""Revealing a masked phone number or email address: the audit row first, then the value."""

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction

from backend.notifications.models import Notification, Recipient
from backend.support.models import ContactReveal

REVEAL = "support.reveal_contact"
# The longest reason an agent may give (``ContactReveal.reason``).
MAX_REASON = 200


class ReasonMissing(ValueError):
    """A reveal without a reason: an agent says why before a clear phone number or email is shown."""


@transaction.atomic
def reveal(
    user: AbstractBaseUser,
    recipient: Recipient,
    field: str,
    notification: Notification | None = None,
    *,
    reason: str,
) -> str:
    """The clear ``field`` ("phone" or "email") of ``recipient``, once who asked, when, why and where is written.

    ``reason`` is the agent's own words (a ticket, "caller asks why no SMS"), at most ``MAX_REASON``
    characters after trimming; an audit that says why lets a reviewer tell a caller's question from
    curiosity. Raises ``PermissionDenied`` without the ``support.reveal_contact`` permission (the
    superuser has it too, and is audited like anyone), ``ReasonMissing`` for an empty or over-long
    reason, ``Recipient.DoesNotExist`` when the person was erased meanwhile, and ``ValueError`` for
    another field.
    """
    if field not in ContactReveal.Field.values:
        raise ValueError(f"Only a phone number or an email address can be revealed, not {field!r}.")
    if not user.has_perm(REVEAL):
        raise PermissionDenied
    reason = " ".join(reason.split())
    if not reason:
        raise ReasonMissing("Say why you need it (a ticket number, the caller's question) before it is shown.")
    if len(reason) > MAX_REASON:
        raise ReasonMissing(f"Keep the reason to {MAX_REASON} characters; this one has {len(reason)}.")
    # Retention may be deleting that notification at this moment: the reveal is then audited against the person alone.
    if notification is not None and not Notification.hold(notification.pk):
        notification = None
    # An erasure may be deleting the person at this moment (erasure.py locks them last): wait for it, and
    # reveal nothing of someone no longer kept.
    if not Recipient.objects.select_for_update(no_key=True).filter(pk=recipient.pk).exists():
        raise Recipient.DoesNotExist(f"{recipient.user_id} was erased.")
    ContactReveal.objects.create(
        user=user, username=user.get_username(), recipient=recipient, recipient_user_id=recipient.user_id,
        field=field, notification=notification, reason=reason,
    )  # fmt: skip
    return getattr(recipient, field)
