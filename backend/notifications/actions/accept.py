"""Acceptance: a send request becomes a stored notification (or the original, for a duplicate)."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from backend.notifications import idempotency, instances, masking, policy, rendering
from backend.notifications.actions import accept_reads
from backend.notifications.actions.accept_rows import Prepared, insert_accepted
from backend.notifications.actions.transitions import enqueue_on_commit, record_state_change
from backend.notifications.models import (
    ApiClient,
    Kind,
    Notification,
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
    def payload(self) -> dict[str, Any]:
        """The request as compared for idempotency (the key itself aside)."""
        return {
            "user_id": self.user_id,
            "kind": self.kind,
            "params": self.params,
            "channel": self.channel,
            "priority": self.priority,
            "send_at": self.send_at.isoformat() if self.send_at else None,
        }

    @property
    def hash(self) -> str:
        return idempotency.request_hash(self.payload)


@dataclass(frozen=True)
class Accepted:
    """The outcome of ``accept``: the notification, and for a new one the history written on acceptance.

    ``notification`` is the in-memory object as accepted (a duplicate's original as read); ``history``
    is empty for a duplicate.
    """

    notification: Notification
    duplicate: bool
    history: tuple[StateChange, ...] = ()


def _original(request: SendRequest, scope: str) -> Notification | None:
    original = Notification.objects.filter(idempotency_scope=scope, idempotency_key=request.idempotency_key).first()
    if original is not None and not idempotency.same_request(original.request_hash, request.payload):
        raise IdempotencyConflict(
            f"{request.idempotency_key!r} was already used for a different request; use a new key for a new event."
        )
    return original


def known(
    request: SendRequest, kind: Kind | None, recipient: Recipient | None, client: ApiClient | None
) -> tuple[Kind, Recipient]:
    """``(kind, recipient)`` as looked up for ``request``; ``AcceptError`` naming the one that does not exist.

    A kind ``client`` may not send (``ApiClient.kind_refusal``) is refused as if it did not exist for it.
    """
    if kind is None:
        raise AcceptError("kind", f"unknown kind {request.kind!r}")
    if client is not None and (refusal := client.kind_refusal(kind)):
        raise AcceptError("kind", refusal)
    if recipient is None:
        raise AcceptError(
            "user_id", f"unknown user {request.user_id!r}: create it first with PUT /api/v1/users/{{user_id}}"
        )
    return kind, recipient


def _lookup(
    request: SendRequest, now: datetime, client: ApiClient | None
) -> tuple[Kind, Recipient, policy.Facts | None, Callable[[Kind, str, str], TemplateVersion | None]]:
    """The request's kind and recipient (``AcceptError`` when unknown), the policy's facts and the version choice.

    On PostgreSQL one statement reads them all (``accept_reads``); elsewhere the kind and the
    recipient are read here and the checks query the rest themselves (facts None).
    """
    if connection.vendor == "postgresql":
        kind, recipient, facts, version_for = accept_reads.load(request.kind, request.user_id, now)
        return (*known(request, kind, recipient, client), facts, version_for)
    kind = Kind.objects.filter(name=request.kind).first()
    recipient = kind and Recipient.objects.filter(user_id=request.user_id).first()
    return (*known(request, kind, recipient, client), None, rendering.select_version)


def _check_send_at(kind: Kind, send_at: datetime | None, now: datetime) -> None:
    """A ``send_at`` whose validity window (``Kind.validity_seconds`` after it) closed before ``now`` is refused.

    Such a notification could never be handed to a provider (DESIGN.md §2, validity): accepted, it went
    ``expired`` unseen by its caller. One in the past but still valid is due now.
    """
    if send_at is not None and send_at + timedelta(seconds=kind.validity_seconds) < now:
        raise AcceptError(
            "send_at",
            f"{send_at.isoformat()} is past: a {kind.name} is valid {kind.validity_seconds} s after it, so it "
            "could never be sent. Leave send_at out to send it now.",
        )


def _check_declared_lengths(kind: Kind, params: dict) -> None:
    """Params longer than the kind declares are refused: templates are priced for that worst case."""
    for name, spec in kind.params.items():
        value, limit = params.get(name), spec.get("max_length")
        if isinstance(value, str | int | float) and limit and len(str(value)) > limit:
            raise AcceptError("params", f"{name}: at most {limit} characters for kind {kind.name!r}.")


def _render_check(
    kind: Kind,
    recipient: Recipient,
    channel: str,
    params: dict,
    required: bool,
    version_for: Callable[[Kind, str, str], TemplateVersion | None] = rendering.select_version,
) -> tuple[TemplateVersion | None, str]:
    """The template version to send and its preview, secret params masked; raises AcceptError when it cannot render.

    ``required`` False (a suppressed notification) tolerates a missing template but still checks params.
    ``version_for(kind, channel, language)`` picks the version (a batch passes one that remembers).
    """
    version = version_for(kind, channel, recipient.language)
    if version is None:
        if not required:
            return None, ""
        raise AcceptError(
            "kind",
            f"kind {kind.name!r} has no approved {channel} template in {recipient.language!r} or "
            f"{kind.default_language!r}",
        )
    try:
        # The email document (sanitized HTML) is built at delivery; here only what can fail and the preview.
        rendered = rendering.render(version, params, document=False)
    except rendering.RenderError as exc:
        if exc.caused_by_params:
            raise AcceptError("params", str(exc)) from exc
        # The template, not the caller, is broken: say so, and whom to tell.
        raise AcceptError(
            "kind", f"the approved template {version} cannot be rendered ({exc}); ask the template editors to fix it"
        ) from exc
    return version, masking.masked_preview(version, kind, params, rendered)


@dataclass(frozen=True)
class Checked:
    """What the checks before the policy found: the route, the template version and its preview, the tier."""

    route: policy.Route
    version: TemplateVersion | None
    preview: str
    priority: str


def check(
    request: SendRequest,
    kind: Kind,
    recipient: Recipient,
    facts: policy.Facts | None = None,
    version_for: Callable[[Kind, str, str], TemplateVersion | None] = rendering.select_version,
    now: datetime | None = None,
) -> Checked:
    """The checks of one request before the policy decides: send_at, channel, declared lengths, route, rendering.

    Raises ``AcceptError``. ``facts``, ``version_for`` and ``now`` let a batch load and read them once.
    """
    if kind.name == Kind.DIGEST:
        # The platform folds a rate limit's held messages into it, unsubscribe footer and all; sent directly it
        # reached people who had opted out of marketing, with no List-Unsubscribe, and nobody can switch it off.
        raise AcceptError("kind", f"{kind.name} is made by the platform from held messages; send their own kinds.")
    _check_send_at(kind, request.send_at, now or timezone.now())
    if request.channel and provider_for_channel(request.channel) is None:
        raise AcceptError("channel", f"no provider is configured for channel {request.channel!r}")
    _check_declared_lengths(kind, request.params)
    routed = policy.route(kind, recipient, request.channel, facts)
    version, preview = _render_check(kind, recipient, routed.channel, request.params, not routed.reason, version_for)
    return Checked(routed, version, preview, request.priority or kind.priority)


# The fields ``build`` gives a notification: the rest take their defaults.
_BUILT = (
    "idempotency_key", "idempotency_scope", "request_hash", "client", "recipient", "kind", "channel", "priority",
    "params", "send_at", "state", "reason", "template_version", "preview", "queued_at",
)  # fmt: skip


def notification_maker() -> Callable[..., Notification]:
    """``Notification(**values)`` for the fields ``build`` gives, without ``Model.__init__`` (``instances.maker``).

    A batch makes one and gives it to ``build`` for each of its rows.
    """
    return instances.maker(Notification, _BUILT)


def build(
    request: SendRequest,
    client: ApiClient | None,
    kind: Kind,
    recipient: Recipient,
    checked: Checked,
    decision: policy.Decision,
    now: datetime,
    new_notification: Callable[..., Notification] | None = None,
) -> Prepared:
    """The unsaved row of a checked and decided request. The one shape of the single and the batch send.

    ``new_notification`` is a ``notification_maker()`` (one is made when not given).
    """
    routed = checked.route
    history_reason = decision.reason or (f"fallback: {'; '.join(routed.skipped)}" if routed.skipped else "")
    notification = (new_notification or notification_maker())(
        idempotency_key=request.idempotency_key,
        idempotency_scope=scope_of(client),
        request_hash=request.hash,
        client=client,
        recipient=recipient,
        kind=kind,
        channel=routed.channel,
        priority=checked.priority,
        # A suppressed notification is never rendered again: its secret params need not be kept.
        params=masking.masked_params(kind, request.params) if decision.state == State.SUPPRESSED else request.params,
        send_at=decision.send_at or request.send_at,
        state=decision.state,
        reason=decision.reason,
        template_version=checked.version,
        preview=checked.preview,
        queued_at=now if decision.state == State.QUEUED else None,
    )
    return Prepared(notification, history_reason[:64], decision.digest_at, decision.counted)


def accept(request: SendRequest, client: ApiClient | None) -> Accepted:
    """Store a notification and enqueue it on its tier once the row is committed.

    Idempotent by ``request.idempotency_key``: the same key and request give
    back the original (``duplicate=True``), also under concurrency, where
    the UNIQUE constraint makes every loser of the race read the winner's row.
    Raises ``AcceptError`` (unknown kind/user, unrenderable params),
    ``IdempotencyConflict`` (same key, different request) and
    ``policy.LimitUnavailable`` (an OTP whose per-phone limit cannot be
    checked without Redis: nothing is stored). Any other Redis outage is
    absorbed: see README "When Redis or PostgreSQL is down".
    """
    scope = scope_of(client)
    if not idempotency.first_sighting(scope, request.idempotency_key):
        original = _original(request, scope)
        if original is not None:
            return Accepted(original, duplicate=True)
    now = timezone.now()
    kind, recipient, facts, version_for = _lookup(request, now, client)
    checked = check(request, kind, recipient, facts, version_for, now)
    decision = policy.decide(kind, recipient, checked.route, checked.priority, request.send_at, now, facts)
    prepared = build(request, client, kind, recipient, checked, decision, now)
    change = _store(prepared, now) if prepared.digest_at is None else _store_with_digest(prepared)
    if change is None:
        # The UNIQUE index refused it: a concurrent request with this key won the race, or Redis had
        # forgotten the key. A duplicate keeps no place in the rate limits its decision counted it in.
        policy.forget(list(prepared.counted))
        original = _original(request, scope)
        if original is None:
            raise IntegrityError(f"idempotency key {request.idempotency_key!r} taken, and no original found")
        return Accepted(original, duplicate=True)
    return Accepted(prepared.notification, duplicate=False, history=(change,))


def _store(prepared: Prepared, now: datetime) -> StateChange | None:
    """Insert the row and its first history row at ``now`` (one statement on PostgreSQL); None when its key is taken."""
    notification = prepared.notification
    with policy.uncounted_on_failure(prepared.counted):
        change = insert_accepted([prepared], now).get(notification.pk)
    if change is not None and notification.state == State.QUEUED:
        enqueue_on_commit(notification)
    return change


def _store_with_digest(prepared: Prepared) -> StateChange | None:
    """``_store`` for a notification folded into a digest: the row, its history and the digest in one transaction.

    Its decision was a refusal by the rate limit, which counted no event: nothing to forget if this fails.
    """
    notification = prepared.notification
    try:
        with transaction.atomic():
            notification.save(force_insert=True)
            change = record_state_change(notification, "", notification.state, prepared.history_reason)
            fold_into_digest(notification, prepared.digest_at)
    except IntegrityError:
        return None
    return change


def digest_content(items: list[str]) -> dict[str, Any]:
    """A digest's ``params`` and ``preview`` for the (masked) previews of the notifications it holds, in order."""
    return {"params": {"items": items, "count": len(items)}, "preview": f"{len(items)}: {' · '.join(items)}"[:200]}


def fold_into_digest(notification: Notification, at: datetime) -> None:
    """Add a rate-limited notification to the user's digest going out at ``at`` (created on first use).

    Without a ``digest`` kind and a template for the channel, it stays plainly rate-limited.
    """
    digest_kind = Kind.objects.filter(name=Kind.DIGEST).first()
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
        record_state_change(digest, "", State.SCHEDULED, "digest")
    digest = Notification.objects.select_for_update().get(pk=digest.pk)
    content = digest_content([*digest.params.get("items", []), notification.preview])
    digest.params, digest.preview = content["params"], content["preview"]
    digest.save(update_fields=["params", "preview", "updated_at"])
    Notification.objects.filter(pk=notification.pk).update(digest=digest)
    notification.digest = digest
