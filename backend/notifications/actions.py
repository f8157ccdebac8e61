"""Every state change of a notification, each atomic and recorded as a StateChange.

Views and workers call these; nothing else writes ``Notification.state``.
Claims are conditional UPDATEs (``filter(state=…).update(…)`` and a row
count), so two workers holding the same id never both send.
"""

from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from backend.notifications import idempotency, locales, policy, rendering
from backend.notifications.models import (
    ApiClient,
    Attempt,
    Channel,
    DeadLetter,
    Device,
    Kind,
    Notification,
    Preference,
    Priority,
    Recipient,
    State,
    StateChange,
    TemplateVersion,
)
from backend.notifications.providers.base import provider_for_channel


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


def scope_of(client: ApiClient | None) -> str:
    """The idempotency scope of a caller: each API client has its own key space."""
    return f"client:{client.pk}" if client is not None else "internal"


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


def _original(request: SendRequest, scope: str) -> Notification | None:
    original = Notification.objects.filter(idempotency_scope=scope, idempotency_key=request.idempotency_key).first()
    if original is not None and original.request_hash != request.hash:
        raise IdempotencyConflict(
            f"{request.idempotency_key!r} was already used for a different request; use a new key for a new event."
        )
    return original


def _lookup(request: SendRequest) -> tuple[Kind, Recipient]:
    kind = Kind.objects.filter(name=request.kind).first()
    if kind is None:
        raise AcceptError("kind", f"unknown kind {request.kind!r}")
    recipient = Recipient.objects.filter(user_id=request.user_id).first()
    if recipient is None:
        raise AcceptError(
            "user_id", f"unknown user {request.user_id!r}: create it first with PUT /api/v1/users/{{user_id}}"
        )
    if request.channel and provider_for_channel(request.channel) is None:
        raise AcceptError("channel", f"no provider is configured for channel {request.channel!r}")
    return kind, recipient


def _check_declared_lengths(kind: Kind, params: dict) -> None:
    """Params longer than the kind declares are refused: templates are priced for that worst case."""
    for name, spec in kind.params.items():
        value, limit = params.get(name), spec.get("max_length")
        if isinstance(value, str | int | float) and limit and len(str(value)) > limit:
            raise AcceptError("params", f"{name}: at most {limit} characters for kind {kind.name!r}.")


def _render_check(
    kind: Kind, recipient: Recipient, channel: str, params: dict, required: bool
) -> tuple[TemplateVersion | None, str]:
    """The template version to send and the start of its text; raises AcceptError when it cannot render.

    ``required`` False (a suppressed notification) tolerates a missing template but still checks params.
    """
    version = rendering.select_version(kind, channel, recipient.language)
    if version is None:
        if not required:
            return None, ""
        raise AcceptError(
            "kind",
            f"kind {kind.name!r} has no approved {channel} template in {recipient.language!r} or "
            f"{kind.default_language!r}",
        )
    try:
        rendered = rendering.render(version, params)
    except rendering.RenderError as exc:
        if exc.caused_by_params:
            raise AcceptError("params", str(exc)) from exc
        # The template, not the caller, is broken: say so, and whom to tell.
        raise AcceptError(
            "kind", f"the approved template {version} cannot be rendered ({exc}); ask the template editors to fix it"
        ) from exc
    return version, (rendered.subject or rendered.text)[:200]


def upsert_recipient(user_id: str, data: dict[str, Any]) -> tuple[Recipient, bool]:
    """Create or replace a recipient's contact data; a changed email or phone is usable again."""
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().filter(user_id=user_id).first()
        if recipient is None:
            return Recipient.objects.create(user_id=user_id, **data), True
        if data.get("email") != recipient.email:
            recipient.email_bounced_at, recipient.email_bounce = None, ""
        if data.get("phone") != recipient.phone:
            recipient.phone_disabled_at, recipient.phone_disabled_reason = None, ""
        for field, value in data.items():
            setattr(recipient, field, value)
        recipient.save()
    return recipient, False


def accept(request: SendRequest, client: ApiClient | None) -> Accepted:
    """Store a notification and enqueue it on its tier once the row is committed.

    Idempotent by ``request.idempotency_key``: the same key and request give
    back the original (``duplicate=True``), also under concurrency, where
    the UNIQUE constraint makes every loser of the race read the winner's row.
    Raises ``AcceptError`` (unknown kind/user, unrenderable params) and
    ``IdempotencyConflict`` (same key, different request).
    """
    scope = scope_of(client)
    if not idempotency.first_sighting(scope, request.idempotency_key):
        original = _original(request, scope)
        if original is not None:
            return Accepted(original, duplicate=True)
    kind, recipient = _lookup(request)
    _check_declared_lengths(kind, request.params)
    routed = policy.route(kind, recipient, request.channel)
    version, preview = _render_check(kind, recipient, routed.channel, request.params, required=not routed.reason)
    now = timezone.now()
    priority = request.priority or kind.priority
    decision = policy.decide(kind, recipient, routed, priority, request.send_at, now)
    history_reason = decision.reason or (f"fallback: {'; '.join(routed.skipped)}" if routed.skipped else "")
    try:
        with transaction.atomic():
            notification = Notification.objects.create(
                idempotency_key=request.idempotency_key,
                idempotency_scope=scope,
                request_hash=request.hash,
                client=client,
                recipient=recipient,
                kind=kind,
                channel=routed.channel,
                priority=priority,
                params=request.params,
                send_at=decision.send_at or request.send_at,
                state=decision.state,
                reason=decision.reason,
                template_version=version,
                preview=preview,
                queued_at=now if decision.state == State.QUEUED else None,
            )
            _record(notification, "", decision.state, history_reason[:64])
            if decision.digest_at is not None:
                _fold_into_digest(notification, decision.digest_at)
            if decision.state == State.QUEUED:
                _enqueue_on_commit(notification)
    except IntegrityError:
        original = _original(request, scope)
        if original is None:
            raise
        return Accepted(original, duplicate=True)
    return Accepted(notification, duplicate=False)


def _fold_into_digest(notification: Notification, at: datetime) -> None:
    """Add a rate-limited notification to the user's digest going out at ``at`` (created on first use).

    Without a ``digest`` kind and a template for the channel, it stays plainly rate-limited.
    """
    digest_kind = Kind.objects.filter(name="digest").first()
    recipient = notification.recipient
    version = digest_kind and rendering.select_version(digest_kind, notification.channel, recipient.language)
    if not version:
        Notification.objects.filter(pk=notification.pk).update(reason="rate-limited")
        notification.reason = "rate-limited"
        return
    key = f"digest:{recipient.pk}:{notification.kind.category}:{notification.channel}:{at:%Y%m%dT%H%M}"
    digest, created = Notification.objects.get_or_create(
        idempotency_scope="digest",
        idempotency_key=key,
        defaults={
            "request_hash": "", "recipient": recipient, "kind": digest_kind, "channel": notification.channel,
            "priority": Priority.STANDARD, "params": {"items": [], "count": 0}, "state": State.SCHEDULED,
            "reason": "digest", "send_at": at, "template_version": version,
        },
    )  # fmt: skip
    if created:
        _record(digest, "", State.SCHEDULED, "digest")
    digest = Notification.objects.select_for_update().get(pk=digest.pk)
    items = [*digest.params.get("items", []), notification.preview]
    digest.params = {"items": items, "count": len(items)}
    digest.preview = f"{len(items)}: {' · '.join(items)}"[:200]
    digest.save(update_fields=["params", "preview", "updated_at"])
    Notification.objects.filter(pk=notification.pk).update(digest=digest)
    notification.digest = digest


def _enqueue_on_commit(notification: Notification, delay: float | None = None) -> None:
    from backend.notifications.tasks import enqueue_delivery

    notification_id, tier = str(notification.pk), notification.priority
    transaction.on_commit(lambda: enqueue_delivery(notification_id, tier, delay))


def claim(notification: Notification) -> bool:
    """Move a queued notification to ``sending`` for this worker; False when another got it first."""
    return _transition(notification, State.SENDING, None, from_state=State.QUEUED, sending_at=timezone.now())


def release(notification_id, from_state: str, reason: str, where: dict[str, Any] | None = None) -> bool:
    """Put a notification whose task may be lost back in its queue, due now (the sweeper's move)."""
    return _transition(
        Notification(pk=notification_id), State.QUEUED, reason, from_state=from_state, where=where,
        queued_at=timezone.now(),
    )  # fmt: skip


def start_attempt(
    notification: Notification, provider: str, device: Device | None = None, sms: dict[str, Any] | None = None
) -> Attempt:
    """Count the attempt and write its row before the provider is called (a crash leaves it without a result).

    ``sms`` carries an SMS attempt's ``sms_encoding``, ``sms_segments``, ``cost`` and ``currency``.
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


def finish_attempt(attempt: Attempt, result: str, latency_ms: int, error: str = "", provider_ref: str = "") -> None:
    """Record a provider call's outcome on its attempt row with one targeted UPDATE."""
    Attempt.objects.filter(pk=attempt.pk).update(
        result=result, latency_ms=latency_ms, error=error[:2000], provider_ref=provider_ref
    )


def _transition(
    notification: Notification,
    to_state: str,
    reason: str | None = "",
    from_state: str = State.SENDING,
    where: dict[str, Any] | None = None,
    **fields: Any,
) -> bool:
    """Move a notification from ``from_state`` to ``to_state``; False when someone else moved it first.

    A conditional UPDATE (plus ``where`` filters) and its StateChange, in one transaction. ``reason``
    None leaves the row's reason as it is (and records none in the history).
    """
    now = timezone.now()
    if reason is not None:
        fields["reason"] = reason
    with transaction.atomic():
        moved = Notification.objects.filter(pk=notification.pk, state=from_state, **(where or {})).update(
            state=to_state, updated_at=now, **fields
        )
        if moved:
            _record(notification, from_state, to_state, reason or "")
    if moved:
        notification.state = to_state
        for name, value in fields.items():
            setattr(notification, name, value)
    return bool(moved)


def mark_sent(notification: Notification, provider: str, provider_ref: str, reason: str = "") -> bool:
    """The provider accepted the message (``reason`` "sent-marker" when a crash hid that from the row)."""
    return _transition(
        notification, State.SENT, reason, provider=provider, provider_ref=provider_ref, sent_at=timezone.now(),
        last_error="",
    )  # fmt: skip


def mark_failed(notification: Notification, reason: str, error: str) -> bool:
    """A permanent error, or no way to send: nothing more will be tried."""
    return _transition(notification, State.FAILED, reason, failed_at=timezone.now(), last_error=error[:2000])


def dead_letter(notification: Notification, provider: str, error: str) -> bool:
    """The last attempt failed transiently: fail it and keep a dead letter support can replay."""
    with transaction.atomic():
        moved = mark_failed(notification, "attempts-exhausted", error)
        if moved:
            DeadLetter.objects.create(
                notification=notification, provider=provider, last_error=error[:2000],
                attempts=notification.attempt_count,
            )  # fmt: skip
    return moved


def expire(notification: Notification, from_state: str = State.QUEUED) -> bool:
    """Past its kind's validity window: it will never be handed to a provider."""
    return _transition(
        notification, State.EXPIRED, "validity-expired", from_state=from_state, expired_at=timezone.now()
    )


def requeue_for_retry(notification: Notification, delay: float, error: str) -> bool:
    """Put a notification back in its queue after a transient error, due in ``delay`` seconds."""
    due = timezone.now() + timedelta(seconds=delay)
    with transaction.atomic():
        moved = _transition(notification, State.QUEUED, "retry", queued_at=due, last_error=error[:2000])
        if moved:
            _enqueue_on_commit(notification, delay)
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
        moved = _transition(
            notification, State.QUEUED, "replay", from_state=State.FAILED, queued_at=timezone.now(),
            replayed_attempts=notification.attempt_count, failed_at=None,
        )  # fmt: skip
        if not moved:
            return "skipped"
        _enqueue_on_commit(notification)
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


def save_template_draft(
    kind: Kind, language: str, channel: str, author, subject: str = "", text_body: str = "", html_body: str = ""
) -> TemplateVersion:
    """Store a new draft: version max+1 of its kind × language × channel, written by ``author``.

    Every save is a new version; an approved one is never edited. The HTML
    body is sanitized (bleach allow-list) before it is stored. Two saves at
    once must not both take max+1: the kind's row is locked first (``FOR NO
    KEY UPDATE``, which does not block notifications that merely reference the
    kind), so numbering is serialized per kind.
    """
    for part in (subject, text_body, html_body):
        problem = rendering.text_problem(part)
        if problem:
            raise ApprovalRefused(problem)
    with transaction.atomic():
        Kind.objects.select_for_update(no_key=True).only("pk").get(pk=kind.pk)
        siblings = TemplateVersion.objects.filter(kind=kind, language=language, channel=channel)
        latest = max(siblings.values_list("version", flat=True), default=0)
        return TemplateVersion.objects.create(
            kind=kind, language=language, channel=channel, version=latest + 1, status=TemplateVersion.Status.DRAFT,
            subject=subject, text_body=text_body, html_body=rendering.sanitize_html(html_body), created_by=author,
        )  # fmt: skip


class ApprovalRefused(Exception):
    """A template version cannot be saved or approved; the message says why."""


def approve_template(version: TemplateVersion, user) -> None:
    """Approve a draft: only with the approve permission, never by its author (two-person rule).

    Raises ``ApprovalRefused``.
    """
    if not user.has_perm("notifications.approve_templateversion"):
        raise ApprovalRefused(f"{user.get_username()} may not approve templates.")
    if version.created_by_id is not None and version.created_by_id == user.pk:
        raise ApprovalRefused(f"{version} was written by {user.get_username()}: a second person must approve it.")
    examples = {name: spec["example"] for name, spec in version.kind.params.items() if "example" in spec}
    try:
        rendering.render(version, examples)
    except rendering.RenderError as exc:
        # Approving it would break every send of this kind in this language and channel.
        raise ApprovalRefused(f"{version} does not render with the kind's example params: {exc}") from exc
    updated = TemplateVersion.objects.filter(pk=version.pk, status=TemplateVersion.Status.DRAFT).update(
        status=TemplateVersion.Status.APPROVED, approved_by=user, approved_at=timezone.now()
    )
    if not updated:
        raise ApprovalRefused(f"{version} is already approved.")


class PreferenceRefused(Exception):
    """A preference that cannot be set (a security kind, a channel the kind does not use)."""


def check_preference(kind: Kind, channel: str, enabled: bool) -> None:
    """Raise ``PreferenceRefused`` unless ``kind`` on ``channel`` may be set to ``enabled``."""
    if channel not in kind.channels:
        raise PreferenceRefused(f"{kind.name} is not sent by {channel}; its channels are {', '.join(kind.channels)}.")
    if not enabled and not kind.opt_out_allowed:
        raise PreferenceRefused(f"{kind.name} is a security message and cannot be turned off.")


def set_preference(recipient: Recipient, kind: Kind, channel: str, enabled: bool) -> Preference:
    """Turn one kind on one channel on or off for a user; security kinds cannot be turned off.

    Raises ``PreferenceRefused``.
    """
    check_preference(kind, channel, enabled)
    preference, _ = Preference.objects.update_or_create(
        recipient=recipient, kind=kind, channel=channel, defaults={"enabled": enabled}
    )
    return preference


def update_preferences(recipient: Recipient, data: dict[str, Any], kinds: dict[str, Kind]) -> None:
    """Apply a validated preferences document: only the fields it has change (all or nothing)."""
    with transaction.atomic():
        set_locale(recipient, language=data.get("language"), time_zone=data.get("time_zone"))
        if "quiet_hours" in data:
            hours = data["quiet_hours"] or {}
            set_quiet_hours(recipient, hours.get("start"), hours.get("end"))
        for name, channels in data.get("channels", {}).items():
            for channel, enabled in channels.items():
                set_preference(recipient, kinds[name], channel, enabled)


def register_device(recipient: Recipient, platform: str, token: str, subscription: dict) -> tuple[Device, bool]:
    """Register or refresh a push device; a token seen again is enabled again and belongs to this user now."""
    device, created = Device.objects.update_or_create(
        platform=platform,
        token=token,
        defaults={"recipient": recipient, "subscription": subscription, "disabled_at": None, "disabled_reason": ""},
    )
    return device, created


def set_quiet_hours(recipient: Recipient, start: time | None, end: time | None) -> Recipient:
    """Set the user's quiet hours (local wall times, e.g. 22:00–07:00) or turn them off with ``None, None``.

    Raises ``PreferenceRefused`` for half a window or an empty one (start == end).
    """
    if (start is None) != (end is None):
        raise PreferenceRefused("Quiet hours need both a start and an end time (or neither, to turn them off).")
    if start is not None and start == end:
        raise PreferenceRefused("Quiet hours must end at a different time than they start.")
    recipient.quiet_hours_start, recipient.quiet_hours_end = start, end
    recipient.save(update_fields=["quiet_hours_start", "quiet_hours_end", "updated_at"])
    return recipient


def set_locale(recipient: Recipient, *, language: str | None = None, time_zone: str | None = None) -> Recipient:
    """Change the user's language (ISO 639-1) and/or time zone (IANA); ``None`` leaves one as it is.

    Raises ``PreferenceRefused`` for a code or name Django or tzdata does not know.
    """
    fields = []
    if language is not None:
        if not locales.is_language(language):
            raise PreferenceRefused(f"Unknown language code {language!r}; use an ISO 639-1 code such as en, ar or fa.")
        recipient.language = language
        fields.append("language")
    if time_zone is not None:
        if time_zone not in locales.time_zone_names():
            raise PreferenceRefused(f"Unknown time zone {time_zone!r}; use an IANA name such as Asia/Riyadh.")
        recipient.time_zone = time_zone
        fields.append("time_zone")
    if fields:
        recipient.save(update_fields=[*fields, "updated_at"])
    return recipient
