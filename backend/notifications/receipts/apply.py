"""Apply one verified delivery receipt: keep it once, move the notification forward only.

A receipt is matched by (provider, provider reference). States are ranked ``sent`` < ``delivered`` =
``undelivered``; a receipt moves a notification only from ``sent`` to a final state, with a
conditional UPDATE, so a late ``sent`` (receipts cross on the network) never moves ``delivered``
back, and of two contradicting final receipts the first one wins.
"""

import logging
from dataclasses import dataclass

from django.db import IntegrityError, transaction

from backend.notifications.actions.delivery import disable_address
from backend.notifications.actions.transitions import transition
from backend.notifications.models import Notification, Receipt, State

logger = logging.getLogger(__name__)


class ReceiptError(ValueError):
    """A correctly signed receipt that lacks what every receipt has (the reference, the status)."""


@dataclass(frozen=True)
class ProviderReceipt:
    """One receipt as a provider module read it.

    ``outcome`` is a ``Receipt.Outcome``; ``code`` and ``meaning`` the provider's error code and its
    documented meaning; ``address_dead``: the code says the number itself cannot receive.
    """

    provider_ref: str
    status: str
    outcome: str
    code: str = ""
    meaning: str = ""
    address_dead: bool = False

    @property
    def description(self) -> str:
        """The code and its meaning ("30003: Unreachable destination handset"), or the status without a code."""
        if not self.code:
            return self.status
        return f"{self.code}: {self.meaning}" if self.meaning else self.code


def apply(provider_names: list[str], receipt: ProviderReceipt) -> str:
    """Record ``receipt`` for the notification one of ``provider_names`` sent under its reference.

    Returns "unknown" (no such notification: logged, nothing kept), "duplicate" (this receipt was
    already kept), "moved" (the notification reached ``delivered`` / ``undelivered``) or "kept"
    (recorded, the state stays: an interim status, or it had already moved on).
    """
    notification = find(provider_names, receipt.provider_ref)
    if notification is None:
        return _unknown(provider_names, receipt)
    with transaction.atomic():
        # Retention may be deleting the row at this moment: a receipt for a row gone is unknown.
        if not Notification.hold(notification.pk):
            return _unknown(provider_names, receipt)
        if not _keep(notification, receipt):
            return "duplicate"
        moved = _advance(notification, receipt)
    return "moved" if moved else "kept"


def find(provider_names: list[str], provider_ref: str) -> Notification | None:
    """The notification one of ``provider_names`` accepted under ``provider_ref``, with its kind; None if none."""
    rows = Notification.objects.filter(provider__in=provider_names, provider_ref=provider_ref)
    return rows.select_related("kind").first()


def _unknown(provider_names: list[str], receipt: ProviderReceipt) -> str:
    logger.warning(
        "receipt %r for unknown %s reference %r: ignored",
        receipt.status, "/".join(provider_names), receipt.provider_ref,
    )  # fmt: skip
    return "unknown"


def _keep(notification: Notification, receipt: ProviderReceipt) -> bool:
    """Write the receipt's row; False when the same receipt (status and code) is already there."""
    try:
        with transaction.atomic():
            Receipt.objects.create(
                notification=notification, provider=notification.provider, provider_ref=receipt.provider_ref,
                status=receipt.status[:32], code=receipt.code[:16], meaning=receipt.meaning[:255],
                outcome=receipt.outcome,
            )  # fmt: skip
    except IntegrityError:
        return False
    return True


def _advance(notification: Notification, receipt: ProviderReceipt) -> bool:
    """Move ``sent`` → the receipt's final outcome; disable a dead number. False when nothing moved."""
    if receipt.outcome == Receipt.Outcome.SENT:
        return False
    final = State.DELIVERED if receipt.outcome == Receipt.Outcome.DELIVERED else State.UNDELIVERED
    reason, fields = receipt.status, {}
    if final == State.UNDELIVERED:  # the code says why ("undelivered 30003"); a delivered one's (Vonage 0) says nothing
        reason = f"{receipt.status} {receipt.code}".strip()
        fields["last_error"] = f"{notification.provider} {receipt.description}"[:2000]
    moved = transition(notification, final, reason[:64], State.SENT, **fields)
    if moved and receipt.address_dead:
        disable_address(notification, None, f"{notification.provider} {receipt.description}")
    return moved
