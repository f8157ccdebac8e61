"""``GET /metrics`` for Prometheus: running totals kept as things happen, and a few figures read at scrape time.

Counters (accepted, state changes, attempts, outcomes, the latency histogram) are the running
totals ``metric_counters`` adds as each notification moves: a scrape reads one Redis hash, whatever
the size of the history (a scan of the notification table took 0.5 s at 1,000,000 rows). Gauges
are read now, each through an index that holds only what it counts: the rows not finished yet per
state, the queues, the dead letters not replayed, each provider's breaker.

Access: with ``NOTIFY_METRICS_TOKEN`` set, a scraper sends ``Authorization: Bearer <token>``;
without it, only requests from the loopback address are answered (a Prometheus on the
same host, or an SSH tunnel). Anything else is 401 (a token is expected) or 403.
"""

import hmac
import ipaddress
from collections import defaultdict
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from backend.notifications import aggregates, metric_counters
from backend.notifications.delivery.shared_state import RedisUnavailable, guard
from backend.notifications.metric_counters import LATENCY_BUCKETS, Key
from backend.notifications.models import DeadLetter, Notification, State
from backend.notifications.models.kind import Priority
from backend.notifications.queues import HUEYS

BREAKER_STATES = ("closed", "open", "half-open", "unknown")


def _labelled(totals: dict[Key, int], family: str) -> dict[tuple[str, ...], int]:
    """The totals of one family of ``metric_counters``, by their labels."""
    return {key[1:]: n for key, n in totals.items() if key[0] == family}


def _tiers(totals: dict[Key, int]) -> Iterator[Metric]:
    """Accepted, sent and failed per tier (every tier, 0 before its first), and every state entered."""
    accepted = CounterMetricFamily(
        "notify_notifications_accepted", "Notifications accepted (every row, suppressed ones too).", labels=["tier"]
    )
    sent = CounterMetricFamily("notify_notifications_sent", "Notifications a provider took.", labels=["tier"])
    failed = CounterMetricFamily("notify_notifications_failed", "Notifications that ended failed.", labels=["tier"])
    made, entered = _labelled(totals, "accepted"), _labelled(totals, "state")
    for tier in Priority.values:
        accepted.add_metric([tier], made.get((tier,), 0))
        sent.add_metric([tier], entered.get((tier, State.SENT), 0))
        failed.add_metric([tier], entered.get((tier, State.FAILED), 0))
    changes = CounterMetricFamily(
        "notify_state_changes", "Notifications that entered each state (a retry enters queued again).",
        labels=["tier", "state"],
    )  # fmt: skip
    for labels, n in sorted(entered.items()):
        changes.add_metric(list(labels), n)
    yield from (accepted, sent, failed, changes)


def _latency(totals: dict[Key, int]) -> Metric:
    """Accept (or a deferred send_at) → sent of API sends, per tier, as a cumulative histogram in seconds."""
    histogram = HistogramMetricFamily(
        "notify_accept_to_sent_seconds",
        "From an API send's acceptance (or send_at) to a provider taking it; not campaign rows.",
        labels=["tier"],
    )
    tiers: dict[str, dict[str, int]] = defaultdict(dict)
    for (tier, field), n in _labelled(totals, "latency").items():
        tiers[tier][field] = n
    for tier, fields in sorted(tiers.items()):
        buckets = [(str(b), fields.get(f"le_{b:g}", 0)) for b in LATENCY_BUCKETS] + [("+Inf", fields.get("count", 0))]
        histogram.add_metric([tier], buckets, fields.get("sum_us", 0) / 1e6)
    return histogram


def _providers(totals: dict[Key, int]) -> Iterator[Metric]:
    """Provider calls per result, and where each provider's traffic ended up."""
    attempts = CounterMetricFamily(
        "notify_provider_attempts", "Provider calls with their result recorded.", labels=["provider", "result"]
    )
    for labels, n in sorted(_labelled(totals, "attempt").items()):
        attempts.add_metric(list(labels), n)
    outcomes = CounterMetricFamily(
        "notify_provider_outcomes",
        "Notifications that entered sent, delivered or undelivered, by the provider that took them.",
        labels=["provider", "state"],
    )
    for labels, n in sorted(_labelled(totals, "outcome").items()):
        outcomes.add_metric(list(labels), n)
    yield from (attempts, outcomes)


def _breakers() -> Metric:
    breakers = GaugeMetricFamily(
        "notify_breaker_state",
        "1 for each provider's circuit breaker state now, 0 for the others.",
        labels=["provider", "state"],
    )
    for provider, current in aggregates.breaker_states(aggregates.configured_providers()).items():
        for state in BREAKER_STATES:
            breakers.add_metric([provider, state], 1 if state == current else 0)
    return breakers


def _unfinished(queued: dict[str, int]) -> Metric:
    """Notifications queued, scheduled or sending now, per tier: each count read through a partial index.

    Finished rows are never read: queued and sending rows are those of the tier-queue and lease
    indexes, scheduled ones those of the API schedule index and, for a campaign's (standard tier
    always), the campaign index.
    """
    states = GaugeMetricFamily(
        "notify_notifications", "Notifications queued, scheduled or sending now.", labels=["tier", "state"]
    )
    now: dict[tuple[str, str], int] = {(tier, state): 0 for tier in Priority.values for state in _UNFINISHED}
    for tier, n in queued.items():
        now[tier, State.QUEUED] = n
    unfinished = Notification.objects.order_by()
    for state, rows in (
        (State.SENDING, unfinished.filter(state=State.SENDING)),
        (State.SCHEDULED, unfinished.filter(state=State.SCHEDULED, campaign__isnull=True)),
    ):
        for tier, n in rows.values_list("priority").annotate(n=Count("id")):
            now[tier, state] += n
    # A campaign's scheduled rows wait for its waves. A done campaign has none left (it is done when none is), nor
    # an archived one, so the campaign index is read for each other campaign rather than across all of history.
    campaigns = Notification._meta.get_field("campaign").related_model
    open_campaigns = campaigns.objects.exclude(state="done").filter(archived_at__isnull=True).values("pk")
    now[Priority.STANDARD, State.SCHEDULED] += unfinished.filter(
        state=State.SCHEDULED, campaign__in=open_campaigns
    ).count()
    for labels, n in sorted(now.items()):
        states.add_metric(list(labels), n)
    return states


_UNFINISHED = (State.QUEUED, State.SCHEDULED, State.SENDING)


def _queues(queued: dict[str, int]) -> Iterator[Metric]:
    """Queued rows per tier (PostgreSQL, the truth: ``queued``) and tasks waiting in each Huey queue."""
    depth = GaugeMetricFamily("notify_queue_depth", "Notifications in state queued per tier.", labels=["tier"])
    for tier, n in queued.items():
        depth.add_metric([tier], n)
    yield depth
    tasks = GaugeMetricFamily("notify_queue_tasks", "Tasks waiting in the tier's Huey queue.", labels=["tier"])
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
    """Every ``notify_*`` family: the running totals, and the gauges read from PostgreSQL and Redis now."""

    def collect(self) -> Iterator[Metric]:
        try:
            totals = metric_counters.totals()
        except RedisUnavailable:
            totals = None  # the counter families are left out rather than reported as a reset to 0
        if totals is not None:
            yield from _tiers(totals)
            yield _latency(totals)
            yield from _providers(totals)
        queued = aggregates.queued_now()  # one count serves both families
        yield _unfinished(queued)
        yield _breakers()
        yield from _queues(queued)
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
