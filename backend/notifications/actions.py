"""Every state change of a notification, each atomic and recorded as a StateChange.

Views and workers call these; nothing else writes ``Notification.state``.
Claims are conditional UPDATEs (``filter(state=…).update(…)`` and a row
count), so two workers holding the same id never both send.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from backend.notifications import idempotency, rendering
from backend.notifications.models import (
    ApiClient,
    Attempt,
    Kind,
    Notification,
    Recipient,
    State,
    StateChange,
)
from backend.notifications.providers.base import provider_for_channel

# Where each channel finds its address on the recipient.
_ADDRESS_FIELD = {"email": "email", "sms": "phone"}


class AcceptError(Exception):
    """The request is well formed but cannot be accepted; ``field`` names the culprit.

    The API answers 422 with ``message`` under ``field``.
    """

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class IdempotencyConflict(Exception):
    """The idempotency key was already used with a different request (HTTP 422)."""


@dataclass(frozen=True)
class SendRequest:
    """A validated ``POST /api/v1/notifications``; ``send_at`` is aware or None."""

    idempotency_key: str
    user_id: str
    kind: str
    params: dict[str, Any]
    channel: str | None
    priority: str | None
    send_at: datetime | None

    @property
    def hash(self) -> str:
        return idempotency.request_hash(
            {
                "user_id": self.user_id,
                "kind": self.kind,
                "params": self.params,
                "channel": self.channel,
                "priority": self.priority,
                "send_at": self.send_at.isoformat() if self.send_at else None,
            }
        )


@dataclass(frozen=True)
class Accepted:
    notification: Notification
    duplicate: bool


def _record(notification: Notification, from_state: str, to_state: str, reason: str = "") -> None:
    StateChange.objects.create(notification=notification, from_state=from_state, to_state=to_state, reason=reason)


def _original(request: SendRequest) -> Notification | None:
    original = Notification.objects.filter(idempotency_key=request.idempotency_key).first()
    if original is not None and original.request_hash != request.hash:
        raise IdempotencyConflict(
            f"{request.idempotency_key!r} was already used for a different request; use a new key for a new event."
        )
    return original


def _resolve(request: SendRequest) -> dict[str, Any]:
    """Look up what the request names and check it can be rendered; raises AcceptError."""
    kind = Kind.objects.filter(name=request.kind).first()
    if kind is None:
        raise AcceptError("kind", f"unknown kind {request.kind!r}")
    recipient = Recipient.objects.filter(user_id=request.user_id).first()
    if recipient is None:
        raise AcceptError(
            "user_id", f"unknown user {request.user_id!r}: create it first with PUT /api/v1/users/{{user_id}}"
        )
    channel = request.channel or kind.default_channel
    if provider_for_channel(channel) is None:
        raise AcceptError("channel", f"no provider is configured for channel {channel!r}")
    version = rendering.select_version(kind, channel, recipient.language)
    if version is None:
        raise AcceptError(
            "kind",
            f"kind {kind.name!r} has no approved {channel} template in {recipient.language!r} or "
            f"{kind.default_language!r}",
        )
    try:
        rendered = rendering.render(version, request.params)
    except rendering.RenderError as exc:
        raise AcceptError("params", str(exc)) from exc
    return {
        "kind": kind,
        "recipient": recipient,
        "channel": channel,
        "priority": request.priority or kind.priority,
        "template_version": version,
        "preview": (rendered.subject or rendered.text)[:200],
    }


def accept(request: SendRequest, client: ApiClient | None) -> Accepted:
    """Store a notification and enqueue it on its tier once the row is committed.

    Idempotent by ``request.idempotency_key``: the same key and request give
    back the original (``duplicate=True``), also under concurrency, where
    the UNIQUE constraint makes every loser of the race read the winner's row.
    Raises ``AcceptError`` (unknown kind/user, unrenderable params) and
    ``IdempotencyConflict`` (same key, different request).
    """
    if not idempotency.first_sighting(request.idempotency_key):
        original = _original(request)
        if original is not None:
            return Accepted(original, duplicate=True)
    fields = _resolve(request)
    now = timezone.now()
    address_field = _ADDRESS_FIELD.get(fields["channel"])
    if address_field and not getattr(fields["recipient"], address_field):
        state, reason = State.SUPPRESSED, "no-address"
    elif request.send_at and request.send_at > now:
        state, reason = State.SCHEDULED, "send-at"
    else:
        state, reason = State.QUEUED, ""
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                idempotency_key=request.idempotency_key,
                request_hash=request.hash,
                client=client,
                params=request.params,
                send_at=request.send_at,
                state=state,
                reason=reason,
                queued_at=now if state == State.QUEUED else None,
                **fields,
            )
            _record(notification, "", state, reason)
            if state == State.QUEUED:
                _enqueue_on_commit(notification)
    except IntegrityError:
        original = _original(request)
        if original is None:
            raise
        return Accepted(original, duplicate=True)
    return Accepted(notification, duplicate=False)


def _enqueue_on_commit(notification: Notification, delay: float | None = None) -> None:
    from backend.notifications.tasks import enqueue_delivery

    notification_id, tier = str(notification.pk), notification.priority
    transaction.on_commit(lambda: enqueue_delivery(notification_id, tier, delay))


def claim(notification_id: str) -> Notification | None:
    """Move a queued notification to ``sending`` for this worker; None when it is not queued.

    Counts the attempt in the same UPDATE, so ``attempt_count`` is the
    number of the attempt about to be made.
    """
    now = timezone.now()
    with transaction.atomic():
        claimed = Notification.objects.filter(pk=notification_id, state=State.QUEUED).update(
            state=State.SENDING, sending_at=now, updated_at=now, attempt_count=F("attempt_count") + 1
        )
        if not claimed:
            return None
        notification = Notification.objects.select_related("kind", "recipient", "template_version").get(
            pk=notification_id
        )
        _record(notification, State.QUEUED, State.SENDING)
    return notification


def start_attempt(notification: Notification, provider: str) -> Attempt:
    """Write the attempt row before the provider is called (a crash leaves it without a result)."""
    return Attempt.objects.create(
        notification=notification,
        number=notification.attempt_count,
        provider=provider,
        started_at=timezone.now(),
    )


def finish_attempt(attempt: Attempt, result: str, latency_ms: int, error: str = "", provider_ref: str = "") -> None:
    """Record a provider call's outcome on its attempt row with one targeted UPDATE."""
    Attempt.objects.filter(pk=attempt.pk).update(
        result=result, latency_ms=latency_ms, error=error[:2000], provider_ref=provider_ref
    )


def _transition(notification: Notification, to_state: str, reason: str = "", **fields: Any) -> bool:
    """Move a ``sending`` notification to ``to_state``; False when someone else moved it first."""
    now = timezone.now()
    with transaction.atomic():
        moved = Notification.objects.filter(pk=notification.pk, state=State.SENDING).update(
            state=to_state, reason=reason, updated_at=now, **fields
        )
        if moved:
            _record(notification, State.SENDING, to_state, reason)
    return bool(moved)


def mark_sent(notification: Notification, provider: str, provider_ref: str) -> bool:
    """The provider accepted the message."""
    return _transition(
        notification, State.SENT, provider=provider, provider_ref=provider_ref, sent_at=timezone.now(), last_error=""
    )


def mark_failed(notification: Notification, reason: str, error: str) -> bool:
    """A permanent error, or the last attempt used up: nothing more will be tried."""
    return _transition(notification, State.FAILED, reason, failed_at=timezone.now(), last_error=error[:2000])


def requeue_for_retry(notification: Notification, delay: float, error: str) -> bool:
    """Put a notification back in its queue after a transient error, due in ``delay`` seconds."""
    due = timezone.now() + timedelta(seconds=delay)
    with transaction.atomic():
        moved = _transition(notification, State.QUEUED, "retry", queued_at=due, last_error=error[:2000])
        if moved:
            _enqueue_on_commit(notification, delay)
    return moved
