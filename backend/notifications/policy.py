"""The pre-queue checks of DESIGN.md §2, after the duplicate check: opted-out → otp-limit → quiet-hours → rate-limited.

Each stop is an outcome with a reason, stored on the notification row; none
is silent. Security kinds (OTPs, security alerts) ignore opt-outs, quiet
hours and user rate limits, and have their own, stricter limit per phone
number instead, with a velocity alarm per destination country against SMS
pumping (toll fraud: bots requesting OTPs to premium numbers).

The counters live in Redis; when it is unreachable each fails in a chosen
direction (README "When Redis or PostgreSQL is down"): the per-phone OTP
limit fails CLOSED (``LimitUnavailable``, HTTP 503 with ``Retry-After``:
an OTP that cannot be counted is not sent, or SMS pumping would be
unbounded exactly while Redis is down), the velocity alarm and the user
rate limits fail OPEN (an outage sends a little more marketing rather than
dropping transactional mail).
"""

import functools
import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.crypto import salted_hmac

from backend.notifications import pricing, quiet_hours, rate_limits
from backend.notifications.array_param import in_array
from backend.notifications.delivery.shared_state import RedisUnavailable, guard
from backend.notifications.models import (
    MADE_BY_CAMPAIGN,
    Channel,
    Device,
    Kind,
    Notification,
    Preference,
    Priority,
    Recipient,
    State,
    VelocityAlarm,
)
from backend.notifications.providers.base import provider_for_channel

logger = logging.getLogger(__name__)

# Seconds of each rate-limit window unit of ``NOTIFY_RATE_LIMITS`` (the fan-out counts the same windows).
WINDOW_SECONDS = {"h": 3600, "d": 86400}
# Seconds an OTP caller waits before retrying while its limit cannot be checked: about twice
# shared_state.DOWN_MEMO_SECONDS, so the retry meets a fresh connection attempt.
OTP_RETRY_AFTER = 2


class LimitUnavailable(Exception):
    """A limit that fails closed could not be checked (Redis unreachable); nothing was stored.

    The API answers 503 with ``Retry-After: retry_after`` (seconds) and ``message``; the caller
    retries with the same idempotency key.
    """

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


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
    such notifications into one digest going out at that instant. ``counted`` are the rate-limit
    events deciding it counted (user windows, per-phone OTP, velocity): ``forget`` them when the
    notification turns out not to be stored.
    """

    state: str
    reason: str = ""
    send_at: datetime | None = None
    digest_at: datetime | None = None
    counted: tuple[rate_limits.Event, ...] = ()


@dataclass(frozen=True)
class Facts:
    """What the checks read from the database about one recipient and one kind, loaded once for many sends.

    ``chosen``: the user's explicit choices per channel (``preferences``); ``has_device``: an active
    push device; ``campaign_events``: epoch seconds (oldest first) of campaign notifications of the
    kind's category in the widest rate-limit window (``campaign_events``). ``facts_for`` loads them
    set-based for a batch; without them each check queries on its own.
    """

    chosen: dict[str, bool]
    has_device: bool
    campaign_events: list[float]


def preferences(recipient: Recipient, kind: Kind) -> dict[str, bool]:
    """The user's explicit choices for ``kind`` per channel; a channel missing here is on."""
    return dict(Preference.objects.filter(recipient=recipient, kind=kind).values_list("channel", "enabled"))


def widest_window(kind: Kind) -> float:
    """Seconds of the longest rate-limit window of ``kind``'s category (0 when it has none)."""
    return max((window.seconds for window in _rate_windows_of(kind.category) if window.limit > 0), default=0)


def facts_for(pairs: list[tuple[Kind, Recipient]], now: datetime) -> dict[tuple[int, int], Facts]:
    """``Facts`` per ``(recipient.pk, kind.pk)`` of every pair, in three queries whatever their number."""
    recipients = {recipient.pk for _, recipient in pairs}
    kinds = {kind.pk: kind for kind, _ in pairs}
    chosen: dict[tuple[int, int], dict[str, bool]] = {}
    rows = Preference.objects.filter(recipient__in=in_array(recipients, "bigint"), kind__in=kinds).values_list(
        "recipient_id", "kind_id", "channel", "enabled"
    )
    for recipient_id, kind_id, channel, enabled in rows:
        chosen.setdefault((recipient_id, kind_id), {})[channel] = enabled
    active = Device.objects.filter(recipient__in=in_array(recipients, "bigint"), disabled_at__isnull=True)
    devices = set(active.values_list("recipient_id", flat=True))
    events = _campaign_events_of(recipients, list(kinds.values()), now)
    return {
        (recipient.pk, kind.pk): Facts(
            chosen.get((recipient.pk, kind.pk), {}),
            recipient.pk in devices,
            events.get((recipient.pk, kind.category), []),
        )
        for kind, recipient in pairs
    }


def _campaign_events_of(recipients: set[int], kinds: list[Kind], now: datetime) -> dict[tuple[int, str], list[float]]:
    """``campaign_events`` for many recipients and categories at once: ``{(recipient_id, category): [epoch, …]}``.

    On PostgreSQL each recipient's rows are read by the campaign rows' (recipient, created_at) index
    (``_campaign_rows``), one LATERAL lookup per recipient (``OFFSET 0`` keeps the planner from
    flattening it into a join). With ``recipient IN (…)``, statistics taken before a large campaign
    made the planner read every campaign row through the campaign index and hash them: 207 ms a
    batch of 1,000 recipients among 1,000,000 campaign rows, 5 ms this way (README "Send many at once").
    """
    widest = {kind.category: widest_window(kind) for kind in kinds}
    categories = [category for category, seconds in widest.items() if seconds]
    if not categories:
        return {}
    since = now - timedelta(seconds=max(widest.values()))
    if connection.vendor == "postgresql":
        with transaction.atomic(), connection.cursor() as cursor:
            # Planned for a batch's 1,000 lookups, the statement's cost passes jit_above_cost (100,000 by
            # default) once the table is large, and PostgreSQL compiled it to machine code for every batch:
            # 20–33 ms of its CPU for a read that takes 75 without. Off for this transaction only.
            cursor.execute("SET LOCAL jit = off")
            cursor.execute(
                _campaign_events_sql(),
                [list(recipients), categories, Priority.STANDARD, since, State.SUPPRESSED],
            )
            rows = cursor.fetchall()
    else:
        rows = (
            _campaign_rows()
            .filter(recipient__in=recipients, kind__category__in=categories, created_at__gt=since)
            .order_by("created_at")
            .values_list("recipient_id", "kind__category", "created_at")
        )
    out: dict[tuple[int, str], list[float]] = {}
    for recipient_id, category, at in rows:
        if at.timestamp() > now.timestamp() - widest[category]:
            out.setdefault((recipient_id, category), []).append(at.timestamp())
    return out


def _campaign_rows() -> QuerySet:
    """The notifications a campaign made that count against the user rate limits: standard tier, not suppressed.

    "Made by a campaign" is ``MADE_BY_CAMPAIGN``, ``campaign_id + 0 IS NOT NULL``: the condition of
    ``notification_campaign_rcpt_idx`` (recipient, created_at; migration 0030), which finds a
    recipient's campaign rows and only those, and not the campaign index's (``campaign_id IS NOT
    NULL``). Statistics taken before a first large campaign counted almost no campaign rows, and the
    planner read all of them through the campaign index for each recipient asked. Before migration
    0030 the read went through the index of all of a recipient's rows and visited every API row of
    the window too: a send cost more the more the recipient had been sent.
    """
    return Notification.objects.filter(MADE_BY_CAMPAIGN, priority=Priority.STANDARD).exclude(state=State.SUPPRESSED)


@functools.cache
def _campaign_events_sql() -> str:
    """``_campaign_events_of``'s statement on PostgreSQL: ``_campaign_rows`` of each recipient, one lookup each."""
    notification, kind = Notification._meta, Kind._meta
    q = connection.ops.quote_name

    def col(meta, name: str) -> str:
        return q(meta.get_field(name).column)

    return (
        "SELECT r.id, ev.category, ev.created_at FROM unnest(%s::bigint[]) AS r(id) CROSS JOIN LATERAL ("
        f"SELECT nk.{col(kind, 'category')} AS category, n.{col(notification, 'created_at')} AS created_at "
        f"FROM {q(notification.db_table)} n "
        f"JOIN {q(kind.db_table)} nk ON nk.{col(kind, 'id')} = n.{col(notification, 'kind')} "
        f"WHERE n.{col(notification, 'recipient')} = r.id AND n.{col(notification, 'campaign')} + 0 IS NOT NULL "
        f"AND nk.{col(kind, 'category')} = ANY(%s::text[]) AND n.{col(notification, 'priority')} = %s "
        f"AND n.{col(notification, 'created_at')} > %s AND n.{col(notification, 'state')} <> %s OFFSET 0) AS ev "
        "ORDER BY ev.created_at"
    )


def address_problem(recipient: Recipient, channel: str, has_device: bool | None = None) -> str:
    """Why ``recipient`` cannot be reached on ``channel`` ("" when it can); ``has_device`` when already known."""
    if channel == Channel.PUSH:
        if has_device is None:
            has_device = recipient.devices.filter(disabled_at__isnull=True).exists()
        return "" if has_device else "no-device"
    if channel == Channel.EMAIL:
        return "no-address" if not recipient.email else "address-disabled" if recipient.email_bounced_at else ""
    if channel == Channel.SMS:
        return "no-address" if not recipient.phone else "address-disabled" if recipient.phone_disabled_at else ""
    return ""


def _channel_problem(
    kind: Kind, recipient: Recipient, channel: str, chosen: dict[str, bool], facts: Facts | None
) -> str:
    if kind.opt_out_allowed and chosen.get(channel) is False:
        return "opted-out"
    return address_problem(recipient, channel, facts.has_device if facts else None)


def route(kind: Kind, recipient: Recipient, requested: str | None, facts: Facts | None = None) -> Route:
    """Pick the channel: the requested one, else the first of the kind's channels the user can receive.

    Channels without a configured provider are passed over when routing;
    a requested one is the caller's to fix (``AcceptError`` upstream). ``facts``, when given, replace
    the queries (``facts_for``).
    """
    chosen = facts.chosen if facts else preferences(recipient, kind)
    if requested:
        return Route(requested, _channel_problem(kind, recipient, requested, chosen, facts))
    skipped = []
    for channel in kind.channels:
        if provider_for_channel(channel) is None:
            skipped.append(f"{channel}: no-provider")
            continue
        problem = _channel_problem(kind, recipient, channel, chosen, facts)
        if not problem:
            return Route(channel, "", tuple(skipped))
        skipped.append(f"{channel}: {problem}")
    reasons = {entry.split(": ")[1] for entry in skipped}
    reason = "opted-out" if reasons == {"opted-out"} else skipped[0].split(": ")[1] if skipped else "no-channel"
    return Route(kind.default_channel, reason, tuple(skipped))


def otp_window_key(phone: str) -> str:
    """The Redis key of ``phone``'s OTP window: an HMAC of the number, never the number itself.

    Redis keeps it ``NOTIFY_OTP_WINDOW`` seconds, past an erasure of the person (``erasure.py``): it must
    hold nothing that names them, yet count the same phone whoever's record carries it.
    """
    return "otp:" + salted_hmac("notify.otp-window", phone, algorithm="sha256").hexdigest()[:32]


def _otp_verdict(recipient: Recipient, now: float) -> rate_limits.Verdict:
    """Count one OTP to the phone if the window has room; fails CLOSED (``LimitUnavailable``) without Redis."""
    conf = settings.NOTIFY
    window = rate_limits.Window(otp_window_key(recipient.phone), conf["OTP_WINDOW"], conf["OTP_LIMIT"])
    try:
        return rate_limits.hit([window], now)
    except RedisUnavailable as exc:
        raise LimitUnavailable(
            "The per-phone OTP limit cannot be checked right now (Redis is unreachable), so the code was not "
            f"sent. Nothing was stored: retry with the same Idempotency-Key after {OTP_RETRY_AFTER} seconds.",
            OTP_RETRY_AFTER,
        ) from exc


def _watch_velocity(recipient: Recipient, now: float) -> rate_limits.Event | None:
    """Count OTP SMS per destination country per minute; over the threshold, log and store one alarm a minute.

    The event counted, or None. Fails OPEN: without Redis nothing is counted; the alarm watches
    for fraud, it never stops a send.
    """
    try:
        country = pricing.country_for_number(recipient.phone)
    except pricing.PricingError:
        return None
    key = f"velocity:{country}"
    threshold = settings.NOTIFY["OTP_VELOCITY_PER_MINUTE"]
    try:
        counted = rate_limits.hit([rate_limits.Window(key, 60, 1_000_000_000)], now).counted
    except RedisUnavailable:
        return None
    # The alarm's INSERT failing (the database down) stops the send: its count goes with it.
    with uncounted_on_failure([counted]):
        try:
            sent = rate_limits.count(key, 60, now)
            with guard("velocity alarm"):
                alarm = sent > threshold and cache.add(f"velocity-alarm:{country}:{int(now // 60)}", 1, timeout=120)
        except RedisUnavailable:
            return counted
        if alarm:
            logger.warning("SMS pumping? %d OTP SMS to %s in the last minute (threshold %d)", sent, country, threshold)
            VelocityAlarm.objects.create(country=country, count=sent, threshold=threshold)
    return counted


def forget(counted: list[rate_limits.Event]) -> None:
    """Uncount the rate-limit events of decisions whose notifications were not stored after all.

    A send whose idempotency key the INSERT found taken (a concurrent request won, or the Redis
    fast path had forgotten the key) is a duplicate: it must not keep a place in its user's, its
    phone's or its country's windows. Fails OPEN: without Redis the events stay until they age out.
    """
    try:
        rate_limits.forget(counted)
    except (RedisUnavailable, redis.RedisError) as exc:
        # Best effort on a path that already answers (a duplicate, or the error being raised): never replace it.
        logger.warning("%d rate-limit events of unsent notifications left counted (%s)", len(counted), exc)


@contextmanager
def uncounted_on_failure(counted: Iterable[rate_limits.Event | None]) -> Iterator[None]:
    """Around what must succeed for counted events to stand: if it raises, ``forget`` them, then re-raise.

    ``counted`` is read when the block fails, so a list the block extends is forgotten whole; None
    entries (nothing counted) are skipped. For the write of decided notifications (``actions.accept``,
    ``accept_batch``: only the write goes inside, so once it returned the rows are committed and keep
    their places; a caller's outer transaction rolled back later would leave them counted, and none
    does) and for the decisions themselves (an OTP's velocity alarm meeting the database down).
    """
    try:
        yield
    except BaseException:
        forget([event for event in counted if event is not None])
        raise


def _rate_windows_of(category: str, recipient_pk: int | None = None) -> list[rate_limits.Window]:
    limits = settings.NOTIFY["RATE_LIMITS"].get(category, {})
    return [
        rate_limits.Window(f"rate:{recipient_pk}:{category}:{unit}", WINDOW_SECONDS[unit], limit)
        for unit, limit in sorted(limits.items())
    ]


def _rate_windows(kind: Kind, recipient: Recipient) -> list[rate_limits.Window]:
    return _rate_windows_of(kind.category, recipient.pk)


def campaign_events(kind: Kind, recipient: Recipient, since: float) -> list[float]:
    """Epoch seconds (oldest first) of campaign notifications of ``kind``'s category to ``recipient`` since ``since``.

    A campaign's fan-out makes its rows set-based in SQL and counts no Redis event: the live
    path counts them from here, as the fan-out counts every notification in SQL
    (``campaigns/fanout._over_rate_limit_table``: standard priority, not suppressed), so both see the
    same total. One query over the campaign rows' (recipient, created_at) index.
    """
    made = _campaign_rows().filter(
        recipient=recipient, kind__category=kind.category, created_at__gt=datetime.fromtimestamp(since, tz=UTC)
    )
    return [at.timestamp() for at in made.order_by("created_at").values_list("created_at", flat=True)]


def _rate_plan(
    kind: Kind, recipient: Recipient, now: float, facts: Facts | None
) -> rate_limits.Verdict | list[rate_limits.Window]:
    """The user's rate-limit verdict when it is known without Redis, else the windows (with their room) to hit.

    Each window's room is its limit less the recipient's campaign notifications in it
    (``campaign_events``, or ``facts.campaign_events``); a window they fill refuses without asking Redis.
    """
    windows = _rate_windows(kind, recipient)
    if not any(window.limit > 0 for window in windows):
        return rate_limits.Verdict(True)
    since = now - max(window.seconds for window in windows)
    events = [at for at in facts.campaign_events if at > since] if facts else campaign_events(kind, recipient, since)
    left = []
    for window in windows:
        inside = [at for at in events if at > now - window.seconds]
        if window.limit > 0 and len(inside) >= window.limit:
            return rate_limits.Verdict(False, window, inside[0] + window.seconds)
        left.append(rate_limits.Window(window.key, window.seconds, window.limit - len(inside)))
    return left


def _rate_verdict(kind: Kind, recipient: Recipient, now: float, facts: Facts | None = None) -> rate_limits.Verdict:
    """The user's rate limits for the kind's category (``_rate_plan``); fails OPEN (allowed) without Redis."""
    plan = _rate_plan(kind, recipient, now, facts)
    if isinstance(plan, rate_limits.Verdict):
        return plan
    try:
        return rate_limits.hit(plan, now)
    except RedisUnavailable:
        return rate_limits.Verdict(True)


def _rate_limited(kind: Kind, route_: Route, priority: str) -> bool:
    """Whether ``decide`` counts this notification against the user's rate limits."""
    return not route_.reason and not kind.bypasses_user_policy and priority == Priority.STANDARD


@dataclass(frozen=True)
class Case:
    """One notification to ``decide``, as ``decide_many`` takes them."""

    kind: Kind
    recipient: Recipient
    route: Route
    priority: str
    send_at: datetime | None
    facts: Facts | None = None


def decide_many(cases: list[Case], now: datetime) -> list[Decision | LimitUnavailable]:
    """``decide`` for each case, in order, with every user rate-limit hit in one Redis pipeline.

    The same verdicts as ``decide`` called case by case (``rate_limits.hit_many``); fails OPEN
    without Redis as ``decide`` does. An OTP whose limit cannot be checked gets its
    ``LimitUnavailable`` in its place; the others are decided.
    """
    epoch = now.timestamp()
    plans = [
        _rate_plan(c.kind, c.recipient, epoch, c.facts) if _rate_limited(c.kind, c.route, c.priority) else None
        for c in cases
    ]
    windows = [plan for plan in plans if isinstance(plan, list)]
    try:
        verdicts = rate_limits.hit_many(windows, epoch)
    except RedisUnavailable:
        verdicts = [rate_limits.Verdict(True)] * len(windows)
    # Every event hit_many counted, and those of the decisions made: forgotten if a decision raises.
    counted = [verdict.counted for verdict in verdicts if verdict.counted]
    hits = iter(verdicts)
    out: list[Decision | LimitUnavailable] = []
    # A decision that fails (an OTP's velocity alarm meeting the database down) fails the batch, which stores
    # nothing; that decision forgot its own events (``decide``).
    with uncounted_on_failure(counted):
        for case, plan in zip(cases, plans, strict=True):
            verdict = next(hits) if isinstance(plan, list) else plan
            try:
                decision = decide(
                    case.kind, case.recipient, case.route, case.priority, case.send_at, now, case.facts, verdict
                )
            except LimitUnavailable as exc:
                out.append(exc)
                continue
            out.append(decision)
            if not isinstance(plan, list):  # a rate-limit plan's event is hit_many's, counted above
                counted += decision.counted
    return out


def decide(
    kind: Kind,
    recipient: Recipient,
    route_: Route,
    priority: str,
    send_at: datetime | None,
    now: datetime,
    facts: Facts | None = None,
    verdict: rate_limits.Verdict | None = None,
) -> Decision:
    """Apply opted-out → otp-limit → quiet-hours → rate-limited, in that order (DESIGN.md §2).

    Raises ``LimitUnavailable`` when an OTP's per-phone limit cannot be checked. ``facts``, when
    given, replace the campaign-events query (``facts_for``); ``verdict``, when given, is the user's
    rate-limit verdict already counted (``decide_many``).
    """
    if route_.reason:
        return Decision(State.SUPPRESSED, route_.reason)
    epoch = now.timestamp()
    if kind.bypasses_user_policy:
        if route_.channel != Channel.SMS:
            return _due(send_at, now)
        otp = _otp_verdict(recipient, epoch)
        if not otp.allowed:
            return Decision(State.SUPPRESSED, "otp-limit")
        with uncounted_on_failure([otp.counted]):
            velocity = _watch_velocity(recipient, epoch)
        counted = (otp.counted, velocity)
        return _due(send_at, now, tuple(event for event in counted if event is not None))
    due = send_at if send_at and send_at > now else now
    if priority != Priority.STANDARD:
        return _due(send_at, now)
    end = quiet_hours.quiet_hours_end(due, recipient.time_zone, recipient.quiet_hours_start, recipient.quiet_hours_end)
    verdict = verdict if verdict is not None else _rate_verdict(kind, recipient, epoch, facts)
    if not verdict.allowed:
        return _over_limit(kind, recipient, verdict, now)
    counted = (verdict.counted,) if verdict.counted else ()
    if end is not None:
        return Decision(State.SCHEDULED, "quiet-hours", end, counted=counted)
    return _due(send_at, now, counted)


def _due(send_at: datetime | None, now: datetime, counted: tuple[rate_limits.Event, ...] = ()) -> Decision:
    if send_at and send_at > now:
        return Decision(State.SCHEDULED, "send-at", send_at, counted=counted)
    return Decision(State.QUEUED, counted=counted)


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
