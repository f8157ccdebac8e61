"""Delivery transitions: claim, attempts, sent / failed / dead letter / expired, retries and replays.

Claims are conditional UPDATEs (``filter(state=…).update(…)`` and a row
count), so two workers holding the same id never both send.
"""

from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from backend.notifications import masking, metric_counters
from backend.notifications.actions.transitions import enqueue_on_commit, transition
from backend.notifications.delivery import lease
from backend.notifications.models import (
    Attempt,
    Channel,
    DeadLetter,
    Device,
    Notification,
    Recipient,
    State,
)


def claim(notification: Notification) -> bool:
    """Move a queued notification to ``sending`` for this worker; False when another got it first.

    The claim is a lease of the tier's length (``delivery/lease.py``): the worker's heartbeat renews it.
    A campaign's row is claimed only when fed and its campaign is neither paused nor cancelled
    (``claimable_campaign_row``).
    """
    now = timezone.now()
    return transition(
        notification, State.SENDING, None, from_state=State.QUEUED, sending_at=now,
        lease_until=lease.expiry(notification.priority, now),
        where=claimable_campaign_row() if notification.campaign_id else None,
    )  # fmt: skip


def claimable_campaign_row() -> dict[str, Any]:
    """The claim's conditions on a campaign's row (ORM filters): fed, and its campaign neither paused nor cancelled.

    ``campaigns.fanout.feed`` sets ``queued_at`` when it hands a row over; ``campaigns.actions.pause``
    sets it back to NULL, so a task already in the queue finds its row unclaimable. A retry or a
    sweeper's release that lands during a pause sets ``queued_at`` again: the campaign's state stops
    those. A cancelled campaign's row is never claimed either: a sweeper's release of a row whose worker
    died, or a row a feed marked while the cancel ran, would otherwise be handed over after the cancel
    (``fanout.stop_cancelled`` writes them ``cancelled``). The held campaigns are a subquery, not a
    join: Django turns an UPDATE with a join into ``id IN (SELECT …)``, which PostgreSQL would not
    re-check against a claim that committed first.
    SQL twin for the batch claim: ``claimable_sql``.
    """
    campaigns = Notification._meta.get_field("campaign").related_model
    return {
        "queued_at__isnull": False,
        "campaign_id__in": campaigns.objects.exclude(state__in=_held(campaigns)).values("pk"),
    }


def claimable_sql() -> str:
    """``claimable_campaign_row`` as a condition on the notification table for a raw claim (``delivery/batch.py``)."""
    campaigns = Notification._meta.get_field("campaign").related_model
    table = connection.ops.quote_name(Notification._meta.db_table)
    held = ", ".join(f"'{state}'" for state in _held(campaigns))
    return (
        f"({table}.campaign_id IS NULL OR ({table}.queued_at IS NOT NULL AND {table}.campaign_id NOT IN"
        f" (SELECT c.id FROM {connection.ops.quote_name(campaigns._meta.db_table)} c"
        f" WHERE c.state IN ({held}))))"
    )


def _held(campaigns: type) -> tuple[str, str]:
    """The campaign states whose rows no worker claims: paused (until resumed) and cancelled (for good)."""
    return (campaigns.State.PAUSED, campaigns.State.CANCELLED)


def release(notification_id, tier: str, from_state: str, reason: str, where: dict[str, Any] | None = None) -> bool:
    """Put a notification of ``tier`` whose task may be lost back in its queue, due now (the sweeper's move)."""
    return transition(
        Notification(pk=notification_id, priority=tier), State.QUEUED, reason, from_state=from_state, where=where,
        queued_at=timezone.now(),
    )  # fmt: skip


def start_attempt(
    notification: Notification, provider: str, device: Device | None = None, sms: dict[str, Any] | None = None
) -> Attempt:
    """Count the attempt and write its row before the provider is called (a crash leaves it without a result).

    ``sms`` carries an SMS attempt's ``sms_encoding``, ``sms_segments``, ``cost`` and ``currency``: the cost is
    the quote for the message, which ``finish_attempt`` keeps when the provider takes it.
    """
    Notification.objects.filter(pk=notification.pk).update(attempt_count=F("attempt_count") + 1)
    notification.attempt_count += 1
    return Attempt.objects.create(
        notification=notification,
        number=notification.attempt_count,
        provider=provider,
        device=device,
        started_at=timezone.now(),
        **(sms or {}),
    )


# What a call the provider refused costs: it made no message to bill (Twilio answers an error instead of creating
# one; Vonage's non-zero status is a message rejected). A timed-out call counts so too: its retry is the one billed.
NOT_BILLED = Decimal(0)


def finish_attempt(attempt: Attempt, result: str, latency_ms: int, error: str = "", provider_ref: str = "") -> None:
    """Record a provider call's outcome on its attempt row with one targeted UPDATE (counted for /metrics).

    A priced SMS attempt that failed costs ``NOT_BILLED`` (0, its currency kept): the quote written with the row
    was what it would have cost had the provider taken it. Its encoding and segments stay, as measured.
    """
    refused = {"cost": NOT_BILLED} if result != Attempt.Result.SENT and attempt.cost is not None else {}
    Attempt.objects.filter(pk=attempt.pk).update(
        result=result, latency_ms=latency_ms, error=error[:2000], provider_ref=provider_ref, **refused
    )
    attempt.cost = refused.get("cost", attempt.cost)
    metric_counters.add({("attempt", attempt.provider, result): 1})


def _secrets_at_rest(notification: Notification) -> dict[str, Any]:
    """The fields that mask a notification's secret params once nothing will render them again (masking.py)."""
    if not masking.secret_names(notification.kind):
        return {}
    return {"params": masking.masked_params(notification.kind, notification.params)}


def mark_sent(notification: Notification, provider: str, provider_ref: str, reason: str = "") -> bool:
    """The provider accepted the message.

    ``reason`` says how a crash that hid the acceptance from the row was seen through: "sent-marker" (Redis)
    or "recovered" (the attempt row). Secret params are masked in the row: the provider has the message,
    nothing renders it again.
    """
    return transition(
        notification, State.SENT, reason, provider=provider, provider_ref=provider_ref, sent_at=timezone.now(),
        last_error="", **_secrets_at_rest(notification),
    )  # fmt: skip


def _fail(notification: Notification, reason: str, error: str, **fields: Any) -> bool:
    return transition(notification, State.FAILED, reason, failed_at=timezone.now(), last_error=error[:2000], **fields)


def mark_failed(notification: Notification, reason: str, error: str) -> bool:
    """A permanent error, or no way to send: nothing more will be tried, so secret params are masked in the row."""
    return _fail(notification, reason, error, **_secrets_at_rest(notification))


def dead_letter(notification: Notification, provider: str, error: str) -> bool:
    """The last attempt failed transiently: fail it and keep a dead letter support can replay.

    Secret params stay: a replay within the kind's validity renders the message again from them
    (past it, the replay expires the notification and that masks them).
    """
    with transaction.atomic():
        moved = _fail(notification, "attempts-exhausted", error)
        if moved:
            DeadLetter.objects.create(
                notification=notification, provider=provider, last_error=error[:2000],
                attempts=notification.attempt_count,
            )  # fmt: skip
    return moved


def expire(notification: Notification, from_state: str = State.QUEUED) -> bool:
    """Past its kind's validity window: it will never be handed to a provider, so secret params are masked."""
    return transition(
        notification, State.EXPIRED, "validity-expired", from_state=from_state, expired_at=timezone.now(),
        **_secrets_at_rest(notification),
    )  # fmt: skip


def requeue_for_retry(notification: Notification, delay: float, error: str) -> bool:
    """Put a notification back in its queue after a transient error, due in ``delay`` seconds.

    A campaign's row whose campaign was cancelled while it was in flight is not retried: it
    ends ``cancelled`` (a retry would hand it to a provider after the cancel). False then.
    """
    due = timezone.now() + timedelta(seconds=delay)
    with transaction.atomic():
        moved = transition(
            notification, State.QUEUED, "retry", where={"campaign__cancelled_at__isnull": True}, queued_at=due,
            last_error=error[:2000],
        )  # fmt: skip
        if moved:
            enqueue_on_commit(notification, delay)
        elif notification.campaign_id:
            transition(notification, State.CANCELLED, "campaign-cancelled", last_error=error[:2000])
    return moved


def replay(letter: DeadLetter, by: str) -> str:
    """Send a dead letter's notification again, with a fresh set of attempts.

    Returns "replayed", "expired" (past its validity: never sent late) or
    "skipped" (already replayed, or the notification moved on).
    """
    notification = letter.notification
    with transaction.atomic():
        if (
            DeadLetter.objects.filter(pk=letter.pk, replayed_at__isnull=True).update(
                replayed_at=timezone.now(), replayed_by=by[:150]
            )
            == 0
        ):
            return "skipped"
        if notification.is_expired():
            return "expired" if expire(notification, from_state=State.FAILED) else "skipped"
        moved = transition(
            notification, State.QUEUED, "replay", from_state=State.FAILED, queued_at=timezone.now(),
            replayed_attempts=notification.attempt_count, failed_at=None,
        )  # fmt: skip
        if not moved:
            return "skipped"
        enqueue_on_commit(notification)
    return "replayed"


def disable_address(notification: Notification, device: Device | None, reason: str) -> None:
    """A provider said the address is dead: stop using it until the contact data changes."""
    now = timezone.now()
    if device is not None:
        Device.objects.filter(pk=device.pk).update(disabled_at=now, disabled_reason=reason[:255])
    elif notification.channel == Channel.EMAIL:
        Recipient.objects.filter(pk=notification.recipient_id).update(email_bounced_at=now, email_bounce=reason[:255])
    elif notification.channel == Channel.SMS:
        Recipient.objects.filter(pk=notification.recipient_id).update(
            phone_disabled_at=now, phone_disabled_reason=reason[:255]
        )
