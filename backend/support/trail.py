"""The decision trail of one notification, in plain words an agent can read to a customer.

Built from the rows the platform already writes (DESIGN.md §2): the notification, its state
history (``StateChange``: every move with its reason), its attempts, dead letters and digest,
the user's preferences and quiet hours, and the rate limits in ``settings.NOTIFY``. The policy
checks come first, in the order ``policy.decide`` runs them (duplicate → opted out → OTP limit →
quiet hours → rate limit / digest), then every later move. Times are given in UTC and in the
user's own time zone, as "12 Nov at 14:02".

A state this module has no words for (``delivered``, ``undelivered`` from delivery receipts, or any
later one) is still shown, by its name and its reason: nothing in the history is left out.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from backend.notifications.models import Notification, Preference, StateChange
from backend.notifications.policy import WINDOW_SECONDS

WINDOW_NAMES = {"h": "hour", "d": "day"}

# Why a notification stopped, as a person says it; {channel}, {kind} are filled in.
STOPS = {
    "opted-out": "{kind} on {channel} is off in the user's preferences",
    "no-address": "the user has no {channel} address on file",
    "no-device": "the user has no app installation that can receive push",
    "address-disabled": "the user's {channel} address was disabled after the provider refused it",
    "otp-limit": "too many login codes went to this phone number in a short time (the limit against SMS fraud)",
    "rate-limited": "the user had already received as many {category} messages as the limit allows",
    "digested": "the user had reached the limit for {category} messages, so it was put into a digest",
    "validity-expired": "it was too late: past its validity it is never sent",
    "permanent-error": "the provider refused the address for good",
    "attempts-exhausted": "every attempt failed with a temporary error",
    "render-error": "the template could not be filled in",
    "no-destination": "there was nowhere to send it",
    "campaign-cancelled": "the campaign was cancelled before it went out",
}
# Moves that are no stop, by their reason.
MOVES = {
    "retry": "A temporary error: it will be tried again",
    "lease-expired": "The worker sending it stopped; it went back to the queue",
    "sent-marker": "Recorded as sent after a restart (the provider had already accepted it)",
    "recovered": "Recorded as sent after a restart (the provider had already accepted it)",
    "replay": "Sent again from the dead letters by support",
    "quiet-hours": "Held for the user's quiet hours",
    "send-at": "Scheduled by the caller",
    "campaign-wave": "Held for its campaign's wave in the user's local time",
    "campaign-spread": "Held for its turn in its campaign's spread",
    "sending-hours": "Held for its campaign's sending hours",
    "send-at-reached": "Its time came: queued to be sent",
    "digest": "A digest of held messages",
}


# Why a campaign's row was made scheduled (campaigns/fanout.py send_timing, campaigns/pacing.py).
CAMPAIGN_HOLDS = {
    "campaign-wave": "Scheduled for its campaign's wave, at the chosen wall time on the user's clock",
    "campaign-spread": "Spread over its campaign's sending window",
    "sending-hours": "Outside its campaign's sending hours on the user's clock; it waits for them to open",
}


@dataclass(frozen=True)
class Step:
    """One line of the trail: what happened (``text``), when (``at``, aware, None when unknown), and its ``tone``.

    ``tone`` is "ok" (went ahead), "stop" (not sent), "wait" (held, retried) or "info".
    """

    text: str
    at: datetime | None
    tone: str
    local: str = ""  # ``at`` in the user's time zone, e.g. "12 Nov at 17:02 (Asia/Riyadh)"


def local_time(at: datetime | None, zone_name: str) -> str:
    """``at`` on the user's clock: "12 Nov 2026 at 17:02 (Asia/Riyadh)"; "" for None."""
    if at is None:
        return ""
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        zone_name, zone = "UTC", ZoneInfo("UTC")
    return f"{at.astimezone(zone):%d %b %Y at %H:%M} ({zone_name})"


def state_label(state: str) -> str:
    """A state's name for a person: ``undelivered`` → "Undelivered", whatever state it is."""
    return state.replace("-", " ").replace("_", " ").capitalize() if state else "—"


def trail(notification: Notification, history: list[StateChange] | None = None) -> list[Step]:
    """The decision trail of ``notification``, oldest first (queries: history, preference, limits)."""
    history = history if history is not None else list(notification.state_changes.all())
    zone = notification.recipient.time_zone
    steps = [_accepted(notification)]
    steps += _policy(notification, history[0] if history else None)
    steps += [_move(notification, change) for change in history[1:]]
    return [Step(step.text, step.at, step.tone, local_time(step.at, zone)) for step in steps]


def _accepted(notification: Notification) -> Step:
    source = (
        f"campaign {notification.campaign_id}"
        if notification.campaign_id
        else f"the {notification.client.name} service"
        if notification.client_id
        else "the platform itself"
    )
    return Step(
        f"Requested by {source} with idempotency key “{notification.idempotency_key}”: "
        f"{notification.kind.name} by {notification.channel}, {notification.priority} priority. "
        "Duplicate check: this was the first request with that key (repeats return this notification).",
        notification.created_at,
        "info",
    )


def _words(notification: Notification, reason: str) -> str:
    template = STOPS.get(reason)
    if template is None:
        return reason or "no reason was recorded"
    return template.format(
        channel=notification.channel, kind=notification.kind.name, category=notification.kind.category
    )


def _policy(notification: Notification, first: StateChange | None) -> list[Step]:
    """The checks made when it was accepted, from its first history row."""
    at = first.at if first else notification.created_at
    reason = first.reason if first else notification.reason
    state = first.to_state if first else notification.state
    steps = []
    if reason.startswith("fallback: "):
        passed = "; ".join(
            f"{part.split(': ')[0]} ({_words(notification, part.split(': ')[-1])})" for part in reason[10:].split("; ")
        )
        steps.append(Step(f"Channels passed over: {passed}. It went by {notification.channel}.", at, "info"))
        reason = ""
    if state == "suppressed":
        steps.append(_suppressed(notification, reason, at))
    elif state == "scheduled" and reason == "quiet-hours":
        steps.append(_quiet_hours(notification, at))
    elif state == "scheduled":
        due = local_time(notification.send_at, notification.recipient.time_zone)
        why = CAMPAIGN_HOLDS.get(reason, "Scheduled by the caller")
        steps.append(Step(f"{why}: it goes out on {due}.", at, "wait"))
    else:
        steps.append(
            Step(
                "Every check passed (preferences, limits, quiet hours): it was queued to be sent.",
                at,
                "ok",
            )
        )
    return steps


def _suppressed(notification: Notification, reason: str, at: datetime) -> Step:
    text = f"Not sent: {_words(notification, reason)}"
    if reason == "opted-out":
        text += _opt_out_when(notification)
    elif reason in ("rate-limited", "digested"):
        text += _which_window(notification)
    text += "."
    if reason == "digested" and notification.digest_id:
        digest = notification.digest
        when = local_time(digest.send_at, notification.recipient.time_zone)
        text += f" The digest {digest.pk} goes out on {when}."
    return Step(text, at, "stop")


def _opt_out_when(notification: Notification) -> str:
    """ " since 12 Nov 2026 at 14:02 (Asia/Riyadh), set by API client shop" from the preference row, if there is one.

    Who (``Preference.changed_by``): a service may switch a person's preferences through the API, and
    support told the person they had done it themselves. A row changed before that was recorded says when only.
    """
    row = (
        Preference.objects.filter(
            recipient_id=notification.recipient_id, kind_id=notification.kind_id, channel=notification.channel
        )
        .values_list("updated_at", "changed_by")
        .first()
    )
    if row is None:
        return ""
    changed, by = row
    since = f" since {local_time(changed, notification.recipient.time_zone)}"
    return f"{since}, set by {by}" if by else since


def _which_window(notification: Notification) -> str:
    """Which limit was full: the user's notifications of the category before this one, per window of the limit."""
    category = notification.kind.category
    limits = settings.NOTIFY["RATE_LIMITS"].get(category, {})
    for unit, limit in sorted(limits.items(), key=lambda item: WINDOW_SECONDS[item[0]]):
        since = notification.created_at - timedelta(seconds=WINDOW_SECONDS[unit])
        sent = (
            Notification.objects.filter(
                recipient_id=notification.recipient_id, kind__category=category, priority=notification.priority,
                created_at__gt=since, created_at__lte=notification.created_at,
            ).exclude(state="suppressed").exclude(pk=notification.pk).count()
        )  # fmt: skip
        if sent >= limit:
            return f" ({limit} per {WINDOW_NAMES[unit]}; {sent} in the {WINDOW_NAMES[unit]} before this one)"
    described = ", ".join(f"{limit} per {WINDOW_NAMES[unit]}" for unit, limit in sorted(limits.items()))
    return f" (the limit is {described})" if described else ""


def _quiet_hours(notification: Notification, at: datetime) -> Step:
    recipient = notification.recipient
    window = (
        f"{recipient.quiet_hours_start:%H:%M}–{recipient.quiet_hours_end:%H:%M}"
        if recipient.quiet_hours_start and recipient.quiet_hours_end
        else "set"
    )
    return Step(
        f"Held for quiet hours: the user's quiet hours are {window} in {recipient.time_zone}; it arrived at "
        f"{local_time(at, recipient.time_zone)} on their clock and goes out on "
        f"{local_time(notification.send_at, recipient.time_zone)} ({notification.send_at:%d %b %H:%M} UTC).",
        at,
        "wait",
    )


def _move(notification: Notification, change: StateChange) -> Step:
    """A later move in plain words: known reasons by ``MOVES``/``STOPS``, any other state by its name."""
    to, reason = change.to_state, change.reason
    if to == "sending":
        return Step("Handed to a worker to send.", change.at, "info")
    if to == "sent":
        via = f" by {notification.provider}" if notification.provider else ""
        extra = f" — {MOVES[reason].lower()}" if reason in MOVES else ""
        return Step(f"Accepted{via} for delivery{extra}.", change.at, "ok")
    if reason in MOVES:
        return Step(f"{MOVES[reason]}.", change.at, "wait")
    if to in ("failed", "expired", "cancelled", "suppressed"):
        return Step(f"{state_label(to)}: {_words(notification, reason)}.", change.at, "stop")
    said = f" ({reason})" if reason else ""
    tone = "ok" if to == "delivered" else "stop" if to == "undelivered" else "info"
    return Step(f"{state_label(to)}{said}.", change.at, tone)
