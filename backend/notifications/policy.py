"""The pre-queue checks of DESIGN.md §2, after the duplicate check: opted-out → otp-limit → quiet-hours → rate-limited.

Each stop is an outcome with a reason, stored on the notification row; none
is silent. Security kinds (OTPs, security alerts) ignore opt-outs, quiet
hours and user rate limits, and have their own, stricter limit per phone
number instead, with a velocity alarm per destination country against SMS
pumping (toll fraud: bots requesting OTPs to premium numbers).
"""

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

from backend.notifications import pricing, quiet_hours, rate_limits
from backend.notifications.models import Channel, Kind, Preference, Priority, Recipient, State, VelocityAlarm
from backend.notifications.providers.base import provider_for_channel

logger = logging.getLogger(__name__)

_WINDOW_SECONDS = {"h": 3600, "d": 86400}


@dataclass(frozen=True)
class Route:
    """The channel a notification goes out on, or ``reason`` why none can be used.

    ``skipped`` explains each channel passed over, e.g. ``("push: no-device", "sms: opted-out")``.
    """

    channel: str
    reason: str = ""
    skipped: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Decision:
    """What becomes of an accepted notification: its state, reason and due time.

    ``digest_at`` is set when it is over the rate limit and its kind folds
    such notifications into one digest going out at that instant.
    """

    state: str
    reason: str = ""
    send_at: datetime | None = None
    digest_at: datetime | None = None


def preferences(recipient: Recipient, kind: Kind) -> dict[str, bool]:
    """The user's explicit choices for ``kind`` per channel; a channel missing here is on."""
    return dict(Preference.objects.filter(recipient=recipient, kind=kind).values_list("channel", "enabled"))


def address_problem(recipient: Recipient, channel: str) -> str:
    """Why ``recipient`` cannot be reached on ``channel`` ("" when it can)."""
    if channel == Channel.PUSH:
        return "" if recipient.devices.filter(disabled_at__isnull=True).exists() else "no-device"
    if channel == Channel.EMAIL:
        return "no-address" if not recipient.email else "address-disabled" if recipient.email_bounced_at else ""
    if channel == Channel.SMS:
        return "no-address" if not recipient.phone else "address-disabled" if recipient.phone_disabled_at else ""
    return ""


def _channel_problem(kind: Kind, recipient: Recipient, channel: str, chosen: dict[str, bool]) -> str:
    if kind.opt_out_allowed and chosen.get(channel) is False:
        return "opted-out"
    return address_problem(recipient, channel)


def route(kind: Kind, recipient: Recipient, requested: str | None) -> Route:
    """Pick the channel: the requested one, else the first of the kind's channels the user can receive.

    Channels without a configured provider are passed over when routing;
    a requested one is the caller's to fix (``AcceptError`` upstream).
    """
    chosen = preferences(recipient, kind)
    if requested:
        return Route(requested, _channel_problem(kind, recipient, requested, chosen))
    skipped = []
    for channel in kind.channels:
        if provider_for_channel(channel) is None:
            skipped.append(f"{channel}: no-provider")
            continue
        problem = _channel_problem(kind, recipient, channel, chosen)
        if not problem:
            return Route(channel, "", tuple(skipped))
        skipped.append(f"{channel}: {problem}")
    reasons = {entry.split(": ")[1] for entry in skipped}
    reason = "opted-out" if reasons == {"opted-out"} else skipped[0].split(": ")[1] if skipped else "no-channel"
    return Route(kind.default_channel, reason, tuple(skipped))


def _otp_allowed(recipient: Recipient, now: float) -> bool:
    conf = settings.NOTIFY
    window = rate_limits.Window(f"otp:{recipient.phone}", conf["OTP_WINDOW"], conf["OTP_LIMIT"])
    return rate_limits.hit([window], now).allowed


def _watch_velocity(recipient: Recipient, now: float) -> None:
    """Count OTP SMS per destination country per minute; over the threshold, log and store one alarm a minute."""
    try:
        country = pricing.country_for_number(recipient.phone)
    except pricing.PricingError:
        return
    key = f"velocity:{country}"
    rate_limits.hit([rate_limits.Window(key, 60, 1_000_000_000)], now)
    sent = rate_limits.count(key, 60, now)
    threshold = settings.NOTIFY["OTP_VELOCITY_PER_MINUTE"]
    if sent > threshold and cache.add(f"velocity-alarm:{country}:{int(now // 60)}", 1, timeout=120):
        logger.warning("SMS pumping? %d OTP SMS to %s in the last minute (threshold %d)", sent, country, threshold)
        VelocityAlarm.objects.create(country=country, count=sent, threshold=threshold)


def _rate_windows(kind: Kind, recipient: Recipient) -> list[rate_limits.Window]:
    limits = settings.NOTIFY["RATE_LIMITS"].get(kind.category, {})
    return [
        rate_limits.Window(f"rate:{recipient.pk}:{kind.category}:{unit}", _WINDOW_SECONDS[unit], limit)
        for unit, limit in sorted(limits.items())
    ]


def decide(
    kind: Kind, recipient: Recipient, route_: Route, priority: str, send_at: datetime | None, now: datetime
) -> Decision:
    """Apply opted-out → otp-limit → quiet-hours → rate-limited, in that order (DESIGN.md §2)."""
    if route_.reason:
        return Decision(State.SUPPRESSED, route_.reason)
    epoch = now.timestamp()
    if kind.bypasses_user_policy:
        if route_.channel == Channel.SMS:
            if not _otp_allowed(recipient, epoch):
                return Decision(State.SUPPRESSED, "otp-limit")
            _watch_velocity(recipient, epoch)
        return _due(send_at, now)
    due = send_at if send_at and send_at > now else now
    if priority == Priority.STANDARD:
        end = quiet_hours.quiet_hours_end(
            due, recipient.time_zone, recipient.quiet_hours_start, recipient.quiet_hours_end
        )
        verdict = rate_limits.hit(_rate_windows(kind, recipient), epoch)
        if not verdict.allowed:
            return _over_limit(kind, recipient, verdict, now)
        if end is not None:
            return Decision(State.SCHEDULED, "quiet-hours", end)
    return _due(send_at, now)


def _due(send_at: datetime | None, now: datetime) -> Decision:
    if send_at and send_at > now:
        return Decision(State.SCHEDULED, "send-at", send_at)
    return Decision(State.QUEUED)


def _over_limit(kind: Kind, recipient: Recipient, verdict: rate_limits.Verdict, now: datetime) -> Decision:
    if kind.over_limit != "digest":
        return Decision(State.SUPPRESSED, "rate-limited")
    reopens = datetime.fromtimestamp(verdict.reopens_at, tz=now.tzinfo or timezone.utc)
    # A digest goes out when the window has room again, and never inside quiet hours.
    reopens = reopens.replace(second=0, microsecond=0) + timedelta(minutes=1)
    end = quiet_hours.quiet_hours_end(
        reopens, recipient.time_zone, recipient.quiet_hours_start, recipient.quiet_hours_end
    )
    return Decision(State.SUPPRESSED, "digested", digest_at=end or reopens)
