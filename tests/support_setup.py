"""The support explorer's scene: the demo's users and a few notifications made by the real actions."""

from dataclasses import dataclass
from decimal import Decimal

from backend.notifications import actions
from backend.notifications.models import Attempt, Kind, Notification, Recipient


@dataclass
class Scene:
    """Layla's (u-ar-1, +966501234567) notifications: an SMS sent by Twilio, a promo email she opted out of,
    an SMS dead-lettered after transient errors; and Sam's (u-en-1) shipped email, still queued."""

    sent: Notification
    opted_out: Notification
    dead: Notification
    other: Notification


def send(key: str, user_id: str, kind: str, params: dict, channel: str | None = None) -> Notification:
    request = actions.SendRequest(
        idempotency_key=key, user_id=user_id, kind=kind, params=params, channel=channel, priority=None, send_at=None
    )
    return actions.accept(request, client=None).notification


def deliver_by_twilio(notification: Notification, reference: str) -> None:
    """The worker's path: claim, an attempt row priced for one UCS-2 segment, the provider's yes."""
    assert actions.claim(notification)
    sms = {"sms_encoding": "UCS-2", "sms_segments": 1, "cost": Decimal("0.04500"), "currency": "USD"}
    attempt = actions.start_attempt(notification, "twilio", sms=sms)
    actions.finish_attempt(attempt, Attempt.Result.SENT, 87, provider_ref=reference)
    assert actions.mark_sent(notification, "twilio", reference)


def fail_transiently(notification: Notification) -> None:
    assert actions.claim(notification)
    sms = {"sms_encoding": "UCS-2", "sms_segments": 1, "cost": Decimal("0.04300"), "currency": "USD"}  # the quote
    attempt = actions.start_attempt(notification, "vonage", sms=sms)
    actions.finish_attempt(attempt, Attempt.Result.TRANSIENT, 3001, error="timed out after 3 s")
    assert actions.dead_letter(notification, "vonage", "timed out after 3 s")


def make_scene() -> Scene:
    """Build the scene on top of the demo data (``demo_data`` must have run)."""
    layla = Recipient.objects.get(user_id="u-ar-1")
    sent = send("order-5012-shipped", "u-ar-1", "shipped", {"order": "5012"}, channel="sms")
    deliver_by_twilio(sent, "SM5012abc")
    actions.set_preference(layla, Kind.objects.get(name="promo"), "email", False, by=actions.BY_PREFERENCE_CENTER)
    opted_out = send("promo-week-48", "u-ar-1", "promo", {"percent": "20"}, channel="email")
    dead = send("order-5013-shipped", "u-ar-1", "shipped", {"order": "5013"}, channel="sms")
    fail_transiently(dead)
    other = send("order-7-shipped", "u-en-1", "shipped", {"order": "7"})
    return Scene(*(Notification.objects.get(pk=n.pk) for n in (sent, opted_out, dead, other)))
