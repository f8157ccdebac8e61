"""The figures of the support dashboard (``/support/dashboard/``), each one SQL aggregate.

Every function reads PostgreSQL (SQLite on the embedded default) and returns plain
numbers aligned with ``buckets(window, now)``: a list of UTC bucket starts, oldest
first, the last one holding ``now``. A series is a dict ``name → [value per bucket]``.
Times are UTC; latencies are milliseconds; money is the attempts' own currency.

The figures come from the rows the engine writes anyway (notifications with their
per-state timestamps, attempts, state changes, dead letters), so every process
that delivers is counted, and nothing is incremented inside the engine.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.db.models import Aggregate, Count, DateTimeField, DurationField, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import Coalesce, Greatest, Trunc

from backend.notifications.delivery import breaker
from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client
from backend.notifications.models import Attempt, BreakerEvent, DeadLetter, Notification, State, StateChange
from backend.notifications.models.kind import Channel, Priority
from backend.notifications.providers.config import ProvidersFileError, providers_config

# The final state delivery receipts write (issue 12), named here so the figure needs no model change of its own.
DELIVERED = "delivered"
FAILED_RESULTS = (Attempt.Result.TRANSIENT, Attempt.Result.PERMANENT)


@dataclass(frozen=True)
class Window:
    """A span the dashboard shows, cut into buckets of one ``unit`` ("minute" or "hour")."""

    name: str
    span: timedelta
    unit: str

    @property
    def step(self) -> timedelta:
        return timedelta(minutes=1) if self.unit == "minute" else timedelta(hours=1)

    @property
    def count(self) -> int:
        return int(self.span / self.step)


WINDOWS = {
    "hour": Window("hour", timedelta(hours=1), "minute"),
    "day": Window("day", timedelta(days=1), "hour"),
    "week": Window("week", timedelta(days=7), "hour"),
}


def buckets(window: Window, now: datetime) -> list[datetime]:
    """The window's bucket starts (UTC), oldest first; the last one holds ``now``."""
    now = now.astimezone(UTC)
    last = now.replace(second=0, microsecond=0)
    if window.unit == "hour":
        last = last.replace(minute=0)
    return [last - window.step * i for i in range(window.count - 1, -1, -1)]


def _series(rows, window: Window, now: datetime, name_key: str, missing: float | None = 0) -> dict[str, list]:
    """Rows of {bucket, name, n} as ``name → [n per bucket]``, ``missing`` where a bucket has no row."""
    starts = buckets(window, now)
    index = {start: i for i, start in enumerate(starts)}
    series: dict[str, list] = {}
    for row in rows:
        position = index.get(row["bucket"].astimezone(UTC))
        if position is not None:
            series.setdefault(row[name_key], [missing] * len(starts))[position] = row["n"]
    return dict(sorted(series.items()))


def _bucketed(field: str, window: Window):
    return Trunc(field, window.unit, tzinfo=UTC)


def sent_per_channel(window: Window, now: datetime) -> dict[str, list[int]]:
    """Notifications handed to a provider (``sent_at``) per channel per bucket: ``{"sms": [0, 3, …]}``."""
    start = buckets(window, now)[0]
    rows = (
        Notification.objects.filter(sent_at__gte=start, sent_at__lte=now)
        .annotate(bucket=_bucketed("sent_at", window))
        .values("bucket", "channel")
        .annotate(n=Count("id"))
        .order_by()
    )
    return _series(rows, window, now, "channel")


# Whose latency "accept → sent" measures: a campaign's rows are not accepted but fanned out, and handed to the
# standard tier at the pace the approver approved (hours for "at most 360 an hour"); counted, they made the tier's
# p95 that pace while any such campaign ran. An API send behind a campaign's traffic still counts its wait.
ACCEPTED_BY_THE_API = Q(campaign__isnull=True)


def due_to_sent() -> ExpressionWrapper:
    """Accept → sent: from acceptance, or from ``send_at`` for one deferred (quiet hours, a schedule)."""
    due = Greatest("created_at", Coalesce("send_at", "created_at"), output_field=DateTimeField())
    return ExpressionWrapper(F("sent_at") - due, output_field=DurationField())


class _PercentileCont(Aggregate):
    """PostgreSQL's ``percentile_cont(fraction) WITHIN GROUP (ORDER BY expression)`` (linear interpolation)."""

    function = "percentile_cont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = DurationField()


def percentile(values: list[float] | list[timedelta], fraction: float) -> float | timedelta | None:
    """``percentile_cont`` of ``values`` (interpolated between the closest ranks), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_per_tier(window: Window, now: datetime) -> dict[str, list[float | None]]:
    """Accept → sent p50 and p95 in milliseconds per tier per bucket of ``sent_at``: ``{"high p50": […]}``.

    API sends only (``ACCEPTED_BY_THE_API``). A bucket with nothing sent is None (a gap in the line, not a zero
    latency).
    """
    start = buckets(window, now)[0]
    rows = (
        Notification.objects.filter(ACCEPTED_BY_THE_API, sent_at__gte=start, sent_at__lte=now)
        .annotate(bucket=_bucketed("sent_at", window), latency=due_to_sent())
        .order_by()
    )
    if connection.vendor == "postgresql":
        grouped = rows.values("bucket", "priority").annotate(
            p50=_PercentileCont("latency", fraction=0.5), p95=_PercentileCont("latency", fraction=0.95)
        )
        found = [(r["bucket"], r["priority"], r["p50"], r["p95"]) for r in grouped]
    else:  # SQLite has no percentile_cont: the embedded demo's few rows are ranked here.
        values = defaultdict(list)
        for bucket, priority, latency in rows.values_list("bucket", "priority", "latency"):
            values[bucket, priority].append(latency)
        found = [(b, p, percentile(v, 0.5), percentile(v, 0.95)) for (b, p), v in values.items()]
    flat = []
    for bucket, priority, p50, p95 in found:
        flat.append({"bucket": bucket, "name": f"{priority} p50", "n": _ms(p50)})
        flat.append({"bucket": bucket, "name": f"{priority} p95", "n": _ms(p95)})
    return _series(flat, window, now, "name", missing=None)


def _ms(value: timedelta | float) -> float:
    """Milliseconds, from PostgreSQL's interval or SQLite's microseconds."""
    seconds = value.total_seconds() if isinstance(value, timedelta) else value / 1e6
    return round(seconds * 1000, 1)


def failure_rate_per_provider(window: Window, now: datetime) -> dict[str, list[float | None]]:
    """Share of a provider's finished attempts that failed (transient or permanent), 0–1, per bucket.

    Counted by the attempt's start; an attempt still in flight is left out; a bucket without a
    finished attempt is None.
    """
    start = buckets(window, now)[0]
    rows = (
        Attempt.objects.filter(started_at__gte=start, started_at__lte=now)
        .exclude(result="")
        .annotate(bucket=_bucketed("started_at", window))
        .values("bucket", "provider")
        .annotate(total=Count("id"), failed=Count("id", filter=Q(result__in=FAILED_RESULTS)))
        .order_by()
    )
    flat = [{"bucket": r["bucket"], "provider": r["provider"], "n": round(r["failed"] / r["total"], 4)} for r in rows]
    return _series(flat, window, now, "provider", missing=None)


def dead_letters(window: Window, now: datetime) -> dict[str, list[int]]:
    """Dead letters written per bucket, by the provider that failed last: ``{"twilio": [0, 1, …]}``."""
    start = buckets(window, now)[0]
    rows = (
        DeadLetter.objects.filter(created_at__gte=start, created_at__lte=now)
        .annotate(bucket=_bucketed("created_at", window))
        .values("bucket", "provider")
        .annotate(n=Count("id"))
        .order_by()
    )
    return _series(rows, window, now, "provider")


def open_dead_letters() -> int:
    """Dead letters nobody replayed yet (the backlog support works through)."""
    return DeadLetter.objects.filter(replayed_at__isnull=True).count()


def queued_now() -> dict[str, int]:
    """Notifications in state ``queued`` per tier now, due or waiting for a delayed retry: ``{"high": 0, …}``."""
    counts = dict(
        Notification.objects.filter(state=State.QUEUED).values_list("priority").annotate(n=Count("id")).order_by()
    )
    return {tier: counts.get(tier, 0) for tier in Priority.values}


def queue_depth_per_tier(window: Window, now: datetime) -> dict[str, list[int]]:
    """Notifications in state ``queued`` per tier at the end of each bucket (the last: now).

    Rebuilt backwards from today's count and the state changes of the window: a change into
    ``queued`` adds one, a change out of it takes one away (``StateChange`` records every transition).
    """
    starts = buckets(window, now)
    rows = (
        StateChange.objects.filter(at__gte=starts[0], at__lte=now)
        .filter(Q(to_state=State.QUEUED) | Q(from_state=State.QUEUED))
        .annotate(bucket=_bucketed("at", window), tier=F("notification__priority"))
        .values("bucket", "tier")
        .annotate(into=Count("id", filter=Q(to_state=State.QUEUED)), out=Count("id", filter=Q(from_state=State.QUEUED)))
        .order_by()
    )
    net = _series([{**r, "n": r["into"] - r["out"]} for r in rows], window, now, "tier")
    depth = {}
    for tier, current in queued_now().items():
        flows, levels, level = net.get(tier, [0] * len(starts)), [], current
        for flow in reversed(flows):
            levels.append(max(level, 0))  # a row moved by hand without its state change must not draw a negative queue
            level -= flow
        depth[tier] = levels[::-1]
    return depth


def sms_cost_per_kind_per_day(window: Window, now: datetime) -> dict[str, dict[str, Decimal]]:
    """What SMS attempts cost per kind per UTC day of the window: ``{"2026-11-30": {"otp USD": Decimal(…)}}``.

    Every priced attempt counts at what it cost: a sent one its segments × the price, billed even when a receipt
    later says undelivered; a failed one 0 (``actions.NOT_BILLED``: the provider refused it and made no message).
    A kind's name is joined with the currency, so two currencies are never added up.
    """
    start = buckets(window, now)[0]
    rows = (
        Attempt.objects.filter(started_at__gte=start, started_at__lte=now, notification__channel=Channel.SMS)
        .exclude(cost__isnull=True)
        .annotate(day=Trunc("started_at", "day", tzinfo=UTC))
        .values("day", "notification__kind__name", "currency")
        .annotate(cost=Sum("cost"))
        .order_by("day")
    )
    days: dict[str, dict[str, Decimal]] = {}
    for row in rows:
        name = f"{row['notification__kind__name']} {row['currency']}".strip()
        days.setdefault(row["day"].astimezone(UTC).date().isoformat(), {})[name] = row["cost"]
    return days


def delivered_ratio_per_provider(window: Window, now: datetime) -> dict[str, dict[str, float | int]]:
    """Of the notifications a provider took in the window (``sent_at``), how many its receipts call delivered.

    ``{"twilio": {"sent": 10, "delivered": 7, "ratio": 0.7}}``; a provider that sends no receipts shows 0.
    """
    start = buckets(window, now)[0]
    rows = (
        Notification.objects.filter(sent_at__gte=start, sent_at__lte=now)
        .values("provider")
        .annotate(sent=Count("id"), delivered=Count("id", filter=Q(state=DELIVERED)))
        .order_by("provider")
    )
    return {
        r["provider"]: {"sent": r["sent"], "delivered": r["delivered"], "ratio": round(r["delivered"] / r["sent"], 4)}
        for r in rows
    }


def configured_providers() -> list[str]:
    """The providers in force (providers file or embedded default), sorted; none if the file is broken."""
    try:
        return sorted(providers_config().providers)
    except ProvidersFileError:  # the figures still show what the rows say
        return []


def breaker_states(providers: list[str]) -> dict[str, str]:
    """Each provider's circuit breaker now: closed, open, half-open, or unknown while Redis is unreachable.

    Without Redis (the embedded default) each worker process keeps its own breaker and the web process
    none, so the state is the last change any of them recorded (``BreakerEvent``; closed before the first).
    """
    if redis_client() is None:
        events = BreakerEvent.objects.order_by("-at", "-pk").values_list("to_state", flat=True)
        return {name: events.filter(provider=name).first() or breaker.CLOSED for name in providers}
    try:
        with guard("breaker state for the dashboard"):
            return {name: breaker.state(name) for name in providers}
    except RedisUnavailable:
        return dict.fromkeys(providers, "unknown")
