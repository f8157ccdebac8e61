"""``GET /metrics`` for Prometheus: a collector that reads the figures at scrape time.

Nothing is counted inside the engine: workers run in many processes (and are being
rewritten), so the collector asks PostgreSQL and Redis what happened, the same rows
the dashboard reads. Counters here are totals over the rows the database still holds:
when a retention job deletes old rows Prometheus sees a counter reset, which
``rate()`` and ``increase()`` already handle.

Access: with ``NOTIFY_METRICS_TOKEN`` set, a scraper sends ``Authorization: Bearer <token>``;
without it, only requests from the loopback address are answered (a Prometheus on the
same host, or an SSH tunnel). Anything else is 401 (a token is expected) or 403.
"""

import hmac
import ipaddress
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db.models import Count, Q, Sum
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from backend.notifications import aggregates
from backend.notifications.delivery.shared_state import RedisUnavailable, guard
from backend.notifications.models import Attempt, DeadLetter, Notification, State
from backend.notifications.models.kind import Priority
from backend.notifications.queues import HUEYS

# Accept → sent, seconds: an OTP should land under the first buckets (DESIGN.md §8: p95 ≤ 300 ms),
# a deferred or retried standard notification in the last ones.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
BREAKER_STATES = ("closed", "open", "half-open", "unknown")


def _notification_rows() -> list[dict]:
    """One scan of the notifications: per tier × state × provider, the count, the sent ones, their latencies.

    ``le_<i>`` counts the sent ones at most ``LATENCY_BUCKETS[i]`` seconds from due to sent; ``total`` sums
    them (a timedelta on PostgreSQL, microseconds on SQLite).
    """
    under = {f"le_{i}": Count("id", filter=Q(latency__lte=timedelta(seconds=b))) for i, b in enumerate(LATENCY_BUCKETS)}
    return list(
        Notification.objects.annotate(latency=aggregates.due_to_sent())
        .values("priority", "state", "provider")
        .annotate(n=Count("id"), sent=Count("sent_at"), total=Sum("latency"), **under)
        .order_by()
    )


def _seconds(total: timedelta | int | None) -> float:
    return total.total_seconds() if isinstance(total, timedelta) else (total or 0) / 1e6


def _tiers(rows: list[dict]) -> Iterator[Metric]:
    """Accepted, sent and failed totals per tier, and the notifications in each state now."""
    accepted = CounterMetricFamily(
        "notify_notifications_accepted", "Notifications accepted (every row, suppressed ones too).", labels=["tier"]
    )
    sent = CounterMetricFamily(
        "notify_notifications_sent", "Notifications a provider took (sent_at set).", labels=["tier"]
    )
    failed = CounterMetricFamily("notify_notifications_failed", "Notifications that ended failed.", labels=["tier"])
    states = GaugeMetricFamily("notify_notifications", "Notifications in each state now.", labels=["tier", "state"])
    totals = {tier: defaultdict(int) for tier in Priority.values}
    by_state: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        tier = totals.setdefault(row["priority"], defaultdict(int))
        tier["accepted"] += row["n"]
        tier["sent"] += row["sent"]
        tier["failed"] += row["n"] if row["state"] == State.FAILED else 0
        by_state[row["priority"], row["state"]] += row["n"]
    for name, tier in sorted(totals.items()):
        accepted.add_metric([name], tier["accepted"])
        sent.add_metric([name], tier["sent"])
        failed.add_metric([name], tier["failed"])
    for labels, n in sorted(by_state.items()):
        states.add_metric(list(labels), n)
    yield from (accepted, sent, failed, states)


def _latency(rows: list[dict]) -> Metric:
    """Accept (or deferred send_at) → sent, per tier, as a cumulative histogram in seconds."""
    histogram = HistogramMetricFamily(
        "notify_accept_to_sent_seconds", "From acceptance (or send_at) to a provider taking it.", labels=["tier"]
    )
    tiers: dict[str, dict] = {}
    for row in rows:
        if row["sent"]:
            tier = tiers.setdefault(row["priority"], defaultdict(float))
            for key in [f"le_{i}" for i in range(len(LATENCY_BUCKETS))] + ["sent"]:
                tier[key] += row[key]
            tier["sum"] += _seconds(row["total"])
    for name, tier in sorted(tiers.items()):
        counts = [(str(b), tier[f"le_{i}"]) for i, b in enumerate(LATENCY_BUCKETS)] + [("+Inf", tier["sent"])]
        histogram.add_metric([name], counts, tier["sum"])
    return histogram


def _providers(rows: list[dict]) -> Iterator[Metric]:
    """Attempts per provider and result, notifications per provider and state (delivered, …), breakers."""
    attempts = CounterMetricFamily(
        "notify_provider_attempts",
        "Provider calls by result (in_flight: no answer yet).",
        labels=["provider", "result"],
    )
    for row in Attempt.objects.values("provider", "result").annotate(n=Count("id")).order_by("provider", "result"):
        attempts.add_metric([row["provider"], row["result"] or "in_flight"], row["n"])
    outcomes = GaugeMetricFamily(
        "notify_provider_notifications",
        "Notifications per provider in each state now (delivered, undelivered, …).",
        labels=["provider", "state"],
    )
    by_provider: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        if row["provider"]:
            by_provider[row["provider"], row["state"]] += row["n"]
    for labels, n in sorted(by_provider.items()):
        outcomes.add_metric(list(labels), n)
    breakers = GaugeMetricFamily(
        "notify_breaker_state",
        "1 for each provider's circuit breaker state now, 0 for the others.",
        labels=["provider", "state"],
    )
    for provider, current in aggregates.breaker_states(aggregates.configured_providers()).items():
        for state in BREAKER_STATES:
            breakers.add_metric([provider, state], 1 if state == current else 0)
    yield from (attempts, outcomes, breakers)


def _queues() -> Iterator[Metric]:
    """Queued rows per tier (PostgreSQL, the truth) and tasks waiting in each Huey queue (Redis)."""
    depth = GaugeMetricFamily("notify_queue_depth", "Notifications in state queued per tier.", labels=["tier"])
    for tier, n in aggregates.queued_now().items():
        depth.add_metric([tier], n)
    yield depth
    tasks = GaugeMetricFamily("notify_queue_tasks", "Tasks waiting in the tier's Huey queue (Redis).", labels=["tier"])
    try:
        with guard("queue length for /metrics"):
            for tier, huey in HUEYS.items():
                tasks.add_metric([tier], huey.pending_count())
    except RedisUnavailable:
        return  # the family is left out rather than reported as an empty queue
    yield tasks


def _dead_letters() -> Iterator[Metric]:
    counts = DeadLetter.objects.aggregate(total=Count("id"), open=Count("id", filter=Q(replayed_at__isnull=True)))
    yield CounterMetricFamily("notify_dead_letters", "Dead letters written.", value=counts["total"])
    yield GaugeMetricFamily("notify_dead_letters_open", "Dead letters not replayed yet.", value=counts["open"])


class NotifyCollector(Collector):
    """Every ``notify_*`` family, read from PostgreSQL and Redis when Prometheus scrapes."""

    def collect(self) -> Iterator[Metric]:
        rows = _notification_rows()
        yield from _tiers(rows)
        yield _latency(rows)
        yield from _providers(rows)
        yield from _queues()
        yield from _dead_letters()


def _allowed(request: HttpRequest) -> int:
    """200 if the request may read the metrics, else the status to answer (401 or 403).

    Without a token: a direct request from the loopback address only, never one that came through a proxy.
    """
    token = settings.METRICS_TOKEN
    if token:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        ok = scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())
        return 200 if ok else 401
    if "X-Forwarded-For" in request.headers:
        # The web tier (FORWARDED_ALLOW_IPS=*) and daphne (--proxy-headers) made REMOTE_ADDR of a header that
        # whoever reaches their port writes: "127.0.0.1" from another container would pass as this host.
        return 403
    try:
        return 200 if ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback else 403
    except ValueError:
        return 403


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus text exposition of ``NotifyCollector``; 401/403 for a scraper without the right to it."""
    status = _allowed(request)
    if status == 401:
        response = HttpResponse(
            "A bearer token is required: Authorization: Bearer <NOTIFY_METRICS_TOKEN>.\n",
            status=401,
            content_type="text/plain",
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if status == 403:
        return HttpResponse(
            "Metrics are served to this host only: set NOTIFY_METRICS_TOKEN to scrape from elsewhere.\n",
            status=403,
            content_type="text/plain",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(NotifyCollector())
    response = HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response
