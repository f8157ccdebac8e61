"""/metrics for Prometheus (backend/notifications/metrics.py): who may scrape it, and what it says."""

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from backend.notifications import metric_counters
from backend.notifications.delivery import batch, breaker, dispatch, shared_state
from backend.notifications.models import BreakerEvent, DeadLetter, Notification, State
from backend.notifications.queues import HUEYS
from backend.stubs.smtp_sink import free_port
from campaigns import fanout
from tests.campaigns_setup import approved_and_started, list_segment

pytestmark = pytest.mark.usefixtures("demo_data")

TOKEN = "s3cret-scrape-token"
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def scrape(client, **headers) -> dict[tuple[str, tuple], float]:
    """The samples of one scrape, parsed by Prometheus's own text parser: {(name, labels): value}."""
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples[name, tuple(sorted(labels.items()))]


def test_with_a_token_a_scraper_must_send_it(client, settings):
    settings.METRICS_TOKEN = TOKEN
    missing = client.get("/metrics")
    assert (missing.status_code, missing["WWW-Authenticate"]) == (401, 'Bearer realm="metrics"')
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


def test_without_a_token_only_this_host_may_scrape(client, settings):
    settings.METRICS_TOKEN = ""
    refused = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert refused.status_code == 403
    assert refused.content.decode() == (
        "Metrics are served to this host only: set NOTIFY_METRICS_TOKEN to scrape from elsewhere.\n"
    )
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert scrape(client, REMOTE_ADDR="127.0.0.1")


def test_without_a_token_a_forwarded_request_is_refused_even_from_loopback(client, settings):
    """The web tier (FORWARDED_ALLOW_IPS=*) and daphne (--proxy-headers) take REMOTE_ADDR from X-Forwarded-For of
    anyone who reaches their port, e.g. another container on the compose network: "127.0.0.1" must not pass."""
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 403


def test_the_figures_move_when_a_notification_is_sent(client, send, smtp_sink, django_capture_on_commit_callbacks):
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):  # the enqueue and the counts after commit
        response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "7"}}, key="metrics-1")
    queued = scrape(client)
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.deliver(response.json()["id"])
    after = scrape(client)

    assert value(before, "notify_notifications_accepted_total", tier="standard") == 0
    assert value(queued, "notify_notifications_accepted_total", tier="standard") == 1
    assert value(queued, "notify_queue_depth", tier="standard") == 1
    assert value(queued, "notify_queue_tasks", tier="standard") == 1
    assert value(queued, "notify_notifications", tier="standard", state="queued") == 1
    assert value(queued, "notify_notifications_sent_total", tier="standard") == 0
    assert value(after, "notify_notifications_sent_total", tier="standard") == 1
    assert value(after, "notify_queue_depth", tier="standard") == 0
    assert value(after, "notify_notifications", tier="standard", state="queued") == 0
    assert value(after, "notify_state_changes_total", tier="standard", state="sent") == 1
    assert value(after, "notify_provider_attempts_total", provider="smtp", result="sent") == 1
    assert value(after, "notify_provider_outcomes_total", provider="smtp", state="sent") == 1
    assert value(after, "notify_accept_to_sent_seconds_count", tier="standard") == 1
    assert value(after, "notify_accept_to_sent_seconds_bucket", tier="standard", le="+Inf") == 1
    assert value(after, "notify_notifications_failed_total", tier="high") == 0


def test_latency_buckets_are_cumulative_and_the_sum_is_in_seconds(client, django_capture_on_commit_callbacks):
    counts = Counter()
    for ms in (40, 300, 2000):
        counts.update(metric_counters.sent_latency("standard", NOW, NOW + timedelta(milliseconds=ms)))
    with django_capture_on_commit_callbacks(execute=True):
        metric_counters.add(counts)

    samples = scrape(client)

    bucket = {le: value(samples, "notify_accept_to_sent_seconds_bucket", tier="standard", le=le)
              for le in ("0.05", "0.25", "0.5", "2.5", "+Inf")}  # fmt: skip
    assert bucket == {"0.05": 1, "0.25": 1, "0.5": 2, "2.5": 3, "+Inf": 3}
    assert value(samples, "notify_accept_to_sent_seconds_sum", tier="standard") == pytest.approx(2.34)


def test_unfinished_rows_are_counted_per_state_and_tier_finished_ones_are_not_read(client, send):
    ids = [send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": str(n)}}, key=f"u-{n}").json()["id"]
           for n in range(4)]  # fmt: skip
    Notification.objects.filter(pk=ids[1]).update(state=State.SENDING)
    Notification.objects.filter(pk=ids[2]).update(state=State.SCHEDULED, send_at=NOW)
    Notification.objects.filter(pk=ids[3]).update(state=State.SENT, priority="high")

    samples = scrape(client)

    gauges = {labels: n for (name, labels), n in samples.items() if name == "notify_notifications"}
    assert gauges == {
        (("state", state), ("tier", tier)): (1 if tier == "standard" else 0)
        for state in ("queued", "scheduled", "sending")
        for tier in ("high", "standard")
    }


def test_breakers_and_dead_letters(client, send, settings):
    breaker.reset("smtp")
    for _ in range(settings.NOTIFY["BREAKER_CONSECUTIVE_FAILURES"]):
        breaker.record("smtp", ok=False)
    response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "9"}}, key="dead-1")
    notification = Notification.objects.get(pk=response.json()["id"])
    DeadLetter.objects.create(notification=notification, provider="smtp", attempts=5)
    DeadLetter.objects.create(
        notification=notification, provider="smtp", attempts=5, replayed_at=notification.created_at
    )

    samples = scrape(client)

    assert value(samples, "notify_breaker_state", provider="smtp", state="open") == 1
    assert value(samples, "notify_breaker_state", provider="smtp", state="closed") == 0
    assert value(samples, "notify_breaker_state", provider="fake-sms", state="closed") == 1
    assert value(samples, "notify_dead_letters_total") == 2
    assert value(samples, "notify_dead_letters_open") == 1


def test_while_redis_is_down_the_scrape_still_answers_without_what_redis_holds(client, settings, monkeypatch):
    dead = f"redis://127.0.0.1:{free_port()}/0"
    settings.REDIS_URL = dead
    for tier in HUEYS:
        monkeypatch.setattr(HUEYS[tier].storage, "conn", redis.Redis.from_url(dead))
    shared_state.reset()
    try:
        samples = scrape(client)
    finally:
        shared_state.reset()

    missing = {"notify_queue_tasks", "notify_notifications_accepted_total", "notify_accept_to_sent_seconds_count"}
    assert not [name for name, _ in samples if name in missing]  # left out, not reported as empty or reset
    assert value(samples, "notify_queue_depth", tier="high") == 0  # PostgreSQL still answers
    assert value(samples, "notify_breaker_state", provider="smtp", state="unknown") == 1
    assert value(samples, "notify_breaker_state", provider="smtp", state="closed") == 0


def test_a_running_campaigns_scheduled_rows_are_counted(client, marketer, approver):
    campaign = approved_and_started(marketer, approver, segment=list_segment())
    fanout.fan_out(campaign.pk)
    # As a local-time campaign's waves leave them, each row waiting for its wave.
    waiting = Notification.objects.filter(campaign=campaign).update(state=State.SCHEDULED, send_at=NOW)

    assert waiting == 3
    assert value(scrape(client), "notify_notifications", tier="standard", state="scheduled") == waiting


def test_a_campaigns_rows_count_as_sent_but_not_in_the_api_sends_latency(
    client, marketer, approver, smtp_sink, caller, django_capture_on_commit_callbacks
):
    """They go at their campaign's pace, which would otherwise be the standard tier's latency while it runs."""
    campaign = approved_and_started(marketer, approver, segment=list_segment())
    fanout.fan_out(campaign.pk)
    ids = [str(pk) for pk in Notification.objects.filter(campaign=campaign).values_list("pk", flat=True)]
    Notification.objects.filter(pk__in=ids).update(queued_at=NOW)  # fed, as the feeder hands them over
    latency = ("notify_accept_to_sent_seconds_count", (("tier", "standard"),))
    before = scrape(client)

    with django_capture_on_commit_callbacks(execute=True):
        dispatch.deliver(ids[0])  # one at a time, as a retry goes
        batch.deliver_batch(ids[1:], "standard", caller)
    after = scrape(client)

    assert Notification.objects.filter(pk__in=ids, state=State.SENT).count() == 3
    sent = value(after, "notify_notifications_sent_total", tier="standard")
    assert sent - value(before, "notify_notifications_sent_total", tier="standard") == 3
    assert after.get(latency, 0) == before.get(latency, 0)


def test_without_redis_a_breaker_is_what_the_workers_last_recorded(client, settings):
    """The embedded default's workers each keep their own breaker; the web process, which calls no provider, none."""
    settings.REDIS_URL = ""
    BreakerEvent.objects.create(provider="smtp", from_state="closed", to_state="open", reason="5 consecutive failures")
    BreakerEvent.objects.create(provider="smtp", from_state="open", to_state="half-open", reason="cool-down over")

    samples = scrape(client)

    assert value(samples, "notify_breaker_state", provider="smtp", state="half-open") == 1
    assert value(samples, "notify_breaker_state", provider="smtp", state="open") == 0
    assert value(samples, "notify_breaker_state", provider="fake-sms", state="closed") == 1
