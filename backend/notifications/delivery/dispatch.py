"""One delivery: gate, claim, render, call the provider(s), record the attempt, decide what next.

Order (DESIGN.md §2): validity → breaker / budget / bulkhead (a notification
that must wait is re-scheduled without touching its row) → claim → sent-marker
→ provider call → attempt result → sent, retry with full jitter, failover to
the backup (high tier), dead letter, or failed. Nothing here sleeps.
"""

import logging
import random
import re
import time
import traceback
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Count

from backend.notifications import actions, email_footer, links, masking, pricing, rendering, sms_encoding
from backend.notifications.delivery import breaker, budget, lease, sent_marker
from backend.notifications.delivery.retry import backoff_delay
from backend.notifications.models import Attempt, Channel, Device, Notification, Recipient, State
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, providers_for_channel

logger = logging.getLogger(__name__)

# Seconds to wait for a free bulkhead slot, and for an open breaker (standard tier).
_SLOT_WAIT = (0.05, 0.5)
_BREAKER_WAIT = (1.0, 5.0)


@dataclass
class Target:
    """One destination of a delivery: a provider, and for push the device it serves."""

    provider: Provider
    device: Device | None = None


class Wait(Exception):
    """The delivery cannot start now; try again in ``delay`` seconds (no attempt is used)."""

    def __init__(self, delay: float, reason: str):
        super().__init__(reason)
        self.delay = delay
        self.reason = reason


def _address(notification: Notification, device: Device | None) -> str:
    if device is not None:
        return device.token
    recipient = notification.recipient
    return {"email": recipient.email, "sms": recipient.phone}.get(notification.channel, recipient.user_id)


def build_message(notification: Notification, device: Device | None = None) -> OutboundMessage:
    """Render the notification's template version into what a provider sends.

    Raises ``rendering.RenderError`` if the stored version no longer renders.
    """
    rendered = rendering.render(notification.template_version, notification.params)
    # Marketing mail, and a digest holding marketing items, carries one-click unsubscribe (RFC 8058,
    # DESIGN.md §4) and the visible footer (email_footer); transactional mail does neither.
    headers = {}
    marketing = email_footer.marketing_kinds(notification) if notification.channel == Channel.EMAIL else []
    if marketing:
        recipient = notification.recipient
        rendered = email_footer.with_footer(rendered, recipient, marketing, notification.template_version.language)
        headers = links.unsubscribe_headers(recipient.user_id, marketing[0].name)
    return OutboundMessage(
        notification_id=str(notification.pk),
        channel=notification.channel,
        to=_address(notification, device),
        subject=rendered.subject,
        text=rendered.text,
        html=rendered.html,
        language=notification.template_version.language,
        headers=headers,
        subscription=device.subscription if device is not None else {},
    )


def _targets(notification: Notification) -> list[list[Target]]:
    """Per destination, the providers to try in order (push: one destination per active device)."""
    providers = providers_for_channel(notification.channel)
    if notification.channel != "push":
        return [[Target(p) for p in providers]]
    sent_devices = set(
        Attempt.objects.filter(notification=notification, result=Attempt.Result.SENT).values_list("device", flat=True)
    )
    devices = notification.recipient.devices.filter(disabled_at__isnull=True).exclude(pk__in=sent_devices)
    return device_targets(providers, devices)


def device_targets(providers: list[Provider], devices) -> list[list[Target]]:
    """One destination per device whose platform a push provider serves (the only provider serves them all)."""
    by_type = {}
    for provider in providers:
        by_type.setdefault(provider.__class__.name, provider)
    fallback = providers[0] if len(providers) == 1 else None
    return [[Target(by_type.get(d.platform, fallback), d)] for d in devices if by_type.get(d.platform, fallback)]


def _gate(target: Target, tier: str) -> budget.Slot:
    """Breaker, budget and bulkhead for one call; raises ``Wait`` when the call must not happen now."""
    config = target.provider.config
    if not breaker.allow(config.name):
        raise Wait(random.uniform(*_BREAKER_WAIT), f"breaker-open:{config.name}")
    wait = budget.take_token(config, tier)
    if wait > 0:
        raise Wait(wait, f"budget:{config.name}")
    slot = budget.acquire_slot(config, tier)
    if slot is None:
        raise Wait(random.uniform(*_SLOT_WAIT), f"bulkhead:{config.name}")
    return slot


def sms_cost(message: OutboundMessage, provider: Provider, recipient: Recipient | None = None) -> dict:
    """An SMS attempt's encoding, segments and cost (segments × the provider's price for the number's country).

    The number's country is ``recipient.known_phone_country`` when the message goes to ``recipient``'s
    phone and it is known, else parsed from the number. The cost is left empty when the price list has no
    row for that provider and country, or the number has no country.
    """
    encoding, segments = sms_encoding.encoding_and_segments(message.text)
    fields = {"sms_encoding": encoding, "sms_segments": segments}
    country = recipient.known_phone_country if recipient is not None and message.to == recipient.phone else ""
    try:
        quote = pricing.price_message(segments, message.to, provider.__class__.name, country)
    except pricing.PricingError:
        return fields
    return {**fields, "cost": quote.per_message, "currency": quote.currency}


def _redact(notification: Notification, text: str) -> str:
    """A provider's error as stored: the notification's secrets masked, NUL and lone surrogates replaced (U+FFFD).

    PostgreSQL text cannot hold NUL, and a provider's answer is quoted into the error: one such answer
    would fail the statement recording it, and in a batch the whole wave's results with it.
    """
    return storable(masking.redact(text, notification.kind, notification.params))


# What PostgreSQL's text (and jsonb) cannot hold: NUL, and a UTF-16 surrogate, which a str holds only alone (a JSON
# answer's "\\ud800" decodes to one) and which neither UTF-8 nor jsonb accepts.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with what PostgreSQL's text cannot hold replaced by U+FFFD."""
    return _UNSTORABLE.sub("\ufffd", text)


def storable_reference(reference) -> str:
    """A provider's reference as its column holds it: text, storable, at most 255 characters.

    It is the proof of a send: one that cannot be stored fails the statement recording it (in a batch the whole
    wave's results), and each retry after, which finds the sent-marker and tries to store it again.
    """
    text = storable("" if reference is None else str(reference))
    limit = Notification._meta.get_field("provider_ref").max_length
    if len(text) > limit:
        logger.warning("a provider's reference of %d characters cut to %d", len(text), limit)
    return text[:limit]


def _send(notification: Notification, provider: Provider, message: OutboundMessage) -> str:
    """``provider.send``, with any unexpected exception turned into a transient ``ProviderError``.

    A bug or an odd input must end as a recorded attempt that counts towards
    the retry limit, never as a crash that leaves the row in ``sending`` for
    the sweeper to hand out again and again. The error's text has the
    notification's secret params masked: a provider may quote the message back,
    and the text goes to the attempt row, the notification, a dead letter and the log.
    """
    try:
        return storable_reference(provider.send(message))
    except Exception as exc:
        error = provider_error(notification, provider, exc)
        if error is exc:
            raise
        raise error from None


def provider_error(notification: Notification, provider: Provider, exc: Exception) -> ProviderError:
    """What a call to ``provider`` for ``notification`` raised, as it is recorded: a ``ProviderError``, text redacted.

    A ``ProviderError`` is the same one with its text redacted; anything else (a bug, an odd input) is
    logged with its traceback and becomes a transient one. Shared by ``_send`` and the batch's calls.
    """
    if isinstance(exc, ProviderError):
        exc.args = (_redact(notification, str(exc)),)
        return exc
    trace = _redact(notification, "".join(traceback.format_exception(exc)))
    logger.error("provider %s raised\n%s", provider.name, trace.rstrip())
    error = _redact(notification, f"{provider.name} raised {exc.__class__.__name__}: {exc}")
    return ProviderError(error, permanent=False)


def _call(notification: Notification, target: Target, slot: budget.Slot) -> str:
    """One provider call with its attempt row and breaker bookkeeping; returns the reference."""
    provider = target.provider
    try:
        message = build_message(notification, target.device)
        sms = sms_cost(message, provider, notification.recipient) if notification.channel == "sms" else None
        attempt = actions.start_attempt(notification, provider.name, target.device, sms)
        started = time.monotonic()
        try:
            reference = _send(notification, provider, message)
        except ProviderError as exc:
            latency = round((time.monotonic() - started) * 1000)
            result = Attempt.Result.PERMANENT if exc.permanent else Attempt.Result.TRANSIENT
            actions.finish_attempt(attempt, result, latency, str(exc))
            breaker.record(provider.name, ok=exc.permanent)
            if exc.address_invalid:
                actions.disable_address(notification, target.device, str(exc))
            raise
    finally:
        slot.release()
    sent_marker.put(str(notification.pk), provider.name, reference)
    latency = round((time.monotonic() - started) * 1000)
    actions.finish_attempt(attempt, Attempt.Result.SENT, latency, provider_ref=reference)
    breaker.record(provider.name, ok=True)
    return reference


def _send_to(notification: Notification, candidates: list[Target], gated: tuple[Target, budget.Slot] | None):
    """Try the candidates in order; high tier fails over on a transient error or an open breaker.

    Returns ``(provider, reference)`` or raises the last ``ProviderError`` / ``Wait``.
    """
    failover = notification.priority == "high"
    last: Exception | None = None
    for index, target in enumerate(candidates):
        try:
            slot = gated[1] if gated and gated[0] is target else _gate(target, notification.priority)
        except Wait as wait:
            last = wait
            if failover:
                continue
            raise
        try:
            if notification.is_expired():
                raise Wait(0, "validity-expired")
            return target.provider.name, _call(notification, target, slot)
        except ProviderError as exc:
            last = exc
            if exc.permanent or not failover or index == len(candidates) - 1:
                raise
            logger.info("notification %s: %s failed (%s), failing over", notification.pk, target.provider.name, exc)
    assert last is not None
    raise last


def deliver(notification_id: str) -> None:
    """Deliver one notification if it is still queued; a no-op otherwise."""
    from backend.notifications.tasks import enqueue_delivery

    # By primary key alone, the state checked here (as ``batch.deliver_batch``): with ``state='queued'`` in the
    # statement, statistics taken before a backlog arrived made PostgreSQL read every queued row through the tier
    # queue's partial index to find this one (22 ms behind 300,000 queued rows, 71 ms behind 1,000,000).
    notification = (
        Notification.objects.select_related("kind", "recipient", "template_version")
        .filter(pk=notification_id)
        .order_by()
        .first()
    )
    if notification is None or notification.state != State.QUEUED:
        return
    if notification.is_expired():
        actions.expire(notification)
        return
    destinations = _targets(notification)
    if not destinations:
        if actions.claim(notification):
            _no_destination_left(notification)
        return
    # Gate the first call before claiming: a wait costs no row write and no attempt.
    first = destinations[0][0]
    try:
        gated = (first, _gate(first, notification.priority))
    except Wait as wait:
        if notification.priority != "high" or len(destinations[0]) == 1:
            enqueue_delivery(str(notification.pk), notification.priority, wait.delay)
            return
        gated = None
    if not actions.claim(notification):
        if gated:
            gated[1].release()
        return
    with lease.held(notification):
        _deliver_claimed(notification, destinations, gated)


def _accepted_before(notification: Notification) -> tuple[str, str, str] | None:
    """``(provider, provider_ref, reason)`` when a provider already accepted this notification, else None.

    The sent-marker in Redis answers first (reason "sent-marker"); an attempt
    row whose result is ``sent`` is the durable proof when Redis lost the
    marker (reason "recovered"). Either way whichever provider accepted it
    (the backup after a failover, say), no provider is called again.
    """
    marker = sent_marker.get(str(notification.pk))
    if marker is not None:
        # A marker written before its reference was made storable would fail each retry's mark_sent.
        return (marker[0], storable_reference(marker[1]), "sent-marker")
    if notification.attempt_count == 0:
        return None
    attempt = (
        notification.attempts.filter(result=Attempt.Result.SENT)
        .order_by("-number")
        .values_list("provider", "provider_ref")
        .first()
    )
    return (*attempt, "recovered") if attempt else None


def _no_destination_left(notification: Notification) -> None:
    """Nothing left to call: sent when a provider accepted it before (every device of a push), else failed."""
    accepted = _accepted_before(notification)
    if accepted is not None:
        actions.mark_sent(notification, accepted[0], accepted[1], reason=accepted[2])
    else:
        actions.mark_failed(notification, "no-destination", f"no provider or device for {notification.channel}")


def _deliver_claimed(notification: Notification, destinations: list[list[Target]], gated) -> None:
    # Push goes to each device once: _targets already leaves out the devices that have it.
    accepted = _accepted_before(notification) if notification.channel != "push" else None
    if accepted is not None:
        if gated:
            gated[1].release()
        actions.mark_sent(notification, accepted[0], accepted[1], reason=accepted[2])
        return
    if tries_used(notification) >= settings.NOTIFY["MAX_ATTEMPTS"]:
        # Every attempt so far started and never finished: a worker died each time (a poison message).
        if gated:
            gated[1].release()
        actions.dead_letter(notification, "", "attempts never completed: the worker died during each one")
        return
    sent: tuple[str, str] | None = None
    failure: Exception | None = None
    for index, candidates in enumerate(destinations):
        try:
            sent = _send_to(notification, candidates, gated if index == 0 else None) or sent
        except rendering.RenderError as exc:
            actions.mark_failed(notification, "render-error", _redact(notification, str(exc)))
            return
        except (ProviderError, Wait) as exc:
            # A transient failure of any destination wins: it is worth a retry.
            failure = failure if isinstance(failure, ProviderError) and not failure.permanent else exc
    if sent is None:
        _after_failure(notification, failure)
        return
    if failure is not None:
        # Some devices have it; the rest goes to a retry (_targets leaves out those that have it) only when
        # it is worth one: otherwise it ends sent, never failed, dead-lettered or expired.
        step, delay, tries = _next_step(notification, failure)
        if step == "retry" and tries < settings.NOTIFY["MAX_ATTEMPTS"]:
            logger.info(
                "notification %s: sent to some devices; %s, the rest in %.1f s", notification.pk, failure, delay
            )
            actions.requeue_for_retry(notification, delay, f"other devices: {failure}")
            return
    actions.mark_sent(notification, *sent)


def tries_used(notification: Notification) -> int:
    """Tries since the last replay, what ``MAX_ATTEMPTS`` and the backoff count: ``retries_used``, one per attempt.

    A push to several devices writes an attempt per device's call, so there it is the most attempts any
    one device had (one query): counted per call, a push to five devices used up ``MAX_ATTEMPTS`` (5)
    on its first try and was dead-lettered at its first transient failure, never retried.
    """
    if notification.channel != Channel.PUSH or notification.retries_used <= 1:
        return notification.retries_used
    per_device = (
        notification.attempts.filter(number__gt=notification.replayed_attempts)
        .order_by()
        .values("device")
        .annotate(calls=Count("id"))
        .values_list("calls", flat=True)
    )
    return max(per_device, default=0)


def _retry_delay(notification: Notification, failure: Exception | None, tries: int) -> float:
    """Seconds before trying again after ``failure``: a ``Wait``'s own, else full-jitter backoff (``Retry-After``)."""
    if isinstance(failure, Wait):
        return failure.delay
    conf = settings.NOTIFY
    delay = backoff_delay(max(1, tries), conf["RETRY_BASE"], conf["RETRY_CAP"])
    if failure is not None and failure.retry_after is not None:
        delay = max(delay, failure.retry_after)
    return delay


def _next_step(notification: Notification, failure: Exception | None) -> tuple[str, float, int]:
    """What follows a try that ``failure`` ended: ``(step, delay in seconds, tries_used)``.

    ``step`` is "expire" (past its validity, or the retry would come after it), "fail" (a permanent
    error), "dead-letter" (a transient error with ``MAX_ATTEMPTS`` tries used) or "retry" (after
    ``delay``: a ``Wait``'s own, else full-jitter backoff).
    """
    if isinstance(failure, Wait) and failure.reason == "validity-expired":
        return "expire", 0.0, 0
    if isinstance(failure, ProviderError) and failure.permanent:
        return "fail", 0.0, 0
    tries = tries_used(notification)
    if isinstance(failure, ProviderError) and tries >= settings.NOTIFY["MAX_ATTEMPTS"]:
        return "dead-letter", 0.0, tries
    delay = _retry_delay(notification, failure, tries)
    if notification.valid_until.timestamp() < time.time() + delay:
        return "expire", 0.0, tries
    return "retry", delay, tries


def _after_failure(notification: Notification, failure: Exception | None) -> None:
    step, delay, _ = _next_step(notification, failure)
    error = str(failure) if failure else "no provider accepted the message"
    if step == "expire":
        # Past its validity, or the retry would come after it: it ends now, never late.
        actions.expire(notification, from_state=State.SENDING)
    elif step == "fail":
        actions.mark_failed(notification, "permanent-error", error)
    elif step == "dead-letter":
        last_provider = notification.attempts.order_by("-number").values_list("provider", flat=True).first()
        actions.dead_letter(notification, last_provider or "", error)
    else:
        logger.info("notification %s: %s, retry in %.1f s", notification.pk, error, delay)
        actions.requeue_for_retry(notification, delay, error)
