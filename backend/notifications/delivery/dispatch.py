"""One delivery: claim, render, call the provider, record the attempt, decide what next."""

import logging
import time

from django.conf import settings

from backend.notifications import actions, rendering
from backend.notifications.delivery.retry import backoff_delay
from backend.notifications.models import Attempt, Notification
from backend.notifications.providers.base import OutboundMessage, ProviderError, provider_for_channel

logger = logging.getLogger(__name__)


def _address(notification: Notification) -> str:
    recipient = notification.recipient
    if notification.channel == "email":
        return recipient.email
    if notification.channel == "sms":
        return recipient.phone
    return recipient.user_id


def build_message(notification: Notification) -> OutboundMessage:
    """Render the notification's template version into what a provider sends.

    Raises ``rendering.RenderError`` if the stored version no longer renders.
    """
    rendered = rendering.render(notification.template_version, notification.params)
    return OutboundMessage(
        notification_id=str(notification.pk),
        channel=notification.channel,
        to=_address(notification),
        subject=rendered.subject,
        text=rendered.text,
        html=rendered.html,
        language=notification.template_version.language,
    )


def deliver(notification_id: str) -> None:
    """Deliver one notification if it is still queued; a no-op otherwise.

    Transient errors are retried with full-jitter backoff by scheduling the
    task again (never sleeping here) until ``NOTIFY["MAX_ATTEMPTS"]``;
    permanent errors fail at once.
    """
    notification = actions.claim(notification_id)
    if notification is None:
        return
    provider = provider_for_channel(notification.channel)
    if provider is None:
        actions.mark_failed(notification, "no-provider", f"no provider is configured for {notification.channel}")
        return
    try:
        message = build_message(notification)
    except rendering.RenderError as exc:
        actions.mark_failed(notification, "render-error", str(exc))
        return
    attempt = actions.start_attempt(notification, provider.name)
    started = time.monotonic()
    try:
        reference = provider.send(message)
    except ProviderError as exc:
        latency_ms = round((time.monotonic() - started) * 1000)
        _handle_error(notification, attempt, exc, latency_ms)
        return
    latency_ms = round((time.monotonic() - started) * 1000)
    actions.finish_attempt(attempt, Attempt.Result.SENT, latency_ms, provider_ref=reference)
    actions.mark_sent(notification, provider.name, reference)


def _handle_error(notification: Notification, attempt: Attempt, exc: ProviderError, latency_ms: int) -> None:
    error = str(exc)
    if exc.permanent:
        actions.finish_attempt(attempt, Attempt.Result.PERMANENT, latency_ms, error)
        actions.mark_failed(notification, "permanent-error", error)
        return
    actions.finish_attempt(attempt, Attempt.Result.TRANSIENT, latency_ms, error)
    conf = settings.NOTIFY
    if notification.attempt_count >= conf["MAX_ATTEMPTS"]:
        actions.mark_failed(notification, "attempts-exhausted", error)
        return
    delay = backoff_delay(notification.attempt_count, conf["RETRY_BASE"], conf["RETRY_CAP"])
    if exc.retry_after is not None:
        delay = max(delay, exc.retry_after)
    logger.info("notification %s: transient error (%s), retry in %.1f s", notification.pk, error, delay)
    actions.requeue_for_retry(notification, delay, error)
