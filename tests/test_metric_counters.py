"""The running totals behind /metrics (metric_counters.py): what each writer of a notification's history adds.

Each path that moves rows is driven for real (the single delivery, a batch to the stub provider over
HTTP, a campaign's fan-out and cancel) and its totals compared with what the rows say afterwards.
"""

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext

from backend.notifications import metric_counters
from backend.notifications.delivery import batch, dispatch
from backend.notifications.models import MetricCounter, Notification, State
from campaigns import actions, fanout
from tests.campaigns_setup import approved_and_started, list_segment
from tests.test_delivery_batches import queued_sms

pytestmark = pytest.mark.usefixtures("demo_data")

T = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
BUCKETS = [f"le_{b:g}" for b in metric_counters.LATENCY_BUCKETS]


def latency_buckets(seconds: float) -> list[str]:
    counts = metric_counters.sent_latency("high", T, T + timedelta(seconds=seconds))
    return [bucket for bucket in BUCKETS if counts["latency", "high", bucket]]


@pytest.mark.parametrize(
    ("seconds", "lowest", "sum_us"),
    [
        (0.0, "le_0.05", 0),
        (0.05, "le_0.05", 50_000),  # a bucket holds its bound (Prometheus "le": less than or equal)
        (0.050001, "le_0.1", 50_001),
        (0.3, "le_0.5", 300_000),
        (2.34, "le_2.5", 2_340_000),
        (300.0, "le_300", 300_000_000),
        (-0.2, "le_0.05", 0),  # a clock behind on another machine: never a negative latency
    ],
)
def test_a_sent_row_falls_in_every_bucket_from_the_first_that_holds_its_latency(seconds, lowest, sum_us):
    counts = metric_counters.sent_latency("high", T, T + timedelta(seconds=seconds))
    assert latency_buckets(seconds) == BUCKETS[BUCKETS.index(lowest) :]
    assert (counts["latency", "high", "count"], counts["latency", "high", "sum_us"]) == (1, sum_us)


def test_many_rows_count_as_the_sum_of_each_row_alone():
    """A batch's wave adds ``sent_latencies`` of its rows: the same counters as ``sent_latency`` row by row."""
    seconds = [0.0, 0.05, 0.050001, 0.3, 2.34, 300.0, 301.0, -0.2, 0.3]
    one_by_one: Counter = Counter()
    for value in seconds:
        one_by_one.update(metric_counters.sent_latency("standard", T, T + timedelta(seconds=value)))

    counts = metric_counters.sent_latencies("standard", seconds)

    assert counts == one_by_one
    assert (counts["latency", "standard", "count"], counts["latency", "standard", "le_0.05"]) == (9, 3)
    assert (counts["latency", "standard", "le_0.5"], counts["latency", "standard", "le_300"]) == (6, 8)


def test_past_the_last_bucket_only_the_count_and_sum_move():
    counts = metric_counters.sent_latency("standard", T, T + timedelta(seconds=301))
    assert dict(counts) == {("latency", "standard", "count"): 1, ("latency", "standard", "sum_us"): 301_000_000}


@pytest.mark.parametrize(
    ("from_state", "to_state", "provider", "expected"),
    [
        ("", "queued", "", {("state", "high", "queued"): 2, ("accepted", "high"): 2}),
        ("", "suppressed", "", {("state", "high", "suppressed"): 2, ("accepted", "high"): 2}),
        ("queued", "sending", "twilio", {("state", "high", "sending"): 2}),
        ("sending", "sent", "twilio", {("state", "high", "sent"): 2, ("outcome", "twilio", "sent"): 2}),
        ("sent", "delivered", "twilio", {("state", "high", "delivered"): 2, ("outcome", "twilio", "delivered"): 2}),
        ("sending", "failed", "", {("state", "high", "failed"): 2}),
    ],
)
def test_what_a_move_adds(from_state, to_state, provider, expected):
    assert dict(metric_counters.entered("high", from_state, to_state, 2, provider)) == expected


def test_a_single_delivery_counts_its_acceptance_its_attempt_and_its_latency(
    send, smtp_sink, django_capture_on_commit_callbacks
):
    with time_machine.travel(T, tick=False) as clock:
        with django_capture_on_commit_callbacks(execute=True):
            accepted = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "7"}}, key="k-1")
        clock.shift(0.3)
        with django_capture_on_commit_callbacks(execute=True):
            dispatch.deliver(accepted.json()["id"])

    totals = metric_counters.totals()
    assert Notification.objects.get(pk=accepted.json()["id"]).state == State.SENT
    assert {key: n for key, n in totals.items() if key[0] != "latency"} == {
        ("accepted", "standard"): 1,
        ("state", "standard", "queued"): 1,
        ("state", "standard", "sending"): 1,
        ("state", "standard", "sent"): 1,
        ("outcome", "smtp", "sent"): 1,
        ("attempt", "smtp", "sent"): 1,
    }
    assert {key[2] for key in totals if key[0] == "latency" and key[2].startswith("le_")} == set(BUCKETS[3:])
    assert (totals["latency", "standard", "count"], totals["latency", "standard", "sum_us"]) == (1, 300_000)


def test_nothing_is_counted_for_a_transaction_rolled_back(send, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "7"}}, key="k-1")
    assert callbacks and metric_counters.totals() == {}


@pytest.mark.usefixtures("stub_providers")
def test_a_batch_counts_each_row_once_with_its_attempt_and_latency(send, django_capture_on_commit_callbacks):
    ids = queued_sms(send, 30)
    caller = batch.Caller()
    try:
        with django_capture_on_commit_callbacks(execute=True):
            batch.deliver_batch(ids, "standard", caller)
            batch.deliver_batch(ids, "standard", caller)  # a second worker with the same ids: nothing left to claim
    finally:
        caller.close()

    totals = metric_counters.totals()
    provider = Notification.objects.get(pk=ids[0]).provider
    assert set(Notification.objects.filter(pk__in=ids).values_list("state", flat=True)) == {State.SENT}
    assert totals["state", "standard", "sending"] == totals["state", "standard", "sent"] == 30
    assert totals["attempt", provider, "sent"] == totals["outcome", provider, "sent"] == 30
    assert totals["latency", "standard", "count"] == 30


def test_a_campaigns_fan_out_and_cancel_count_the_rows_they_made_and_stopped(
    marketer, approver, django_capture_on_commit_callbacks
):
    campaign = approved_and_started(marketer, approver, segment=list_segment())
    with django_capture_on_commit_callbacks(execute=True):
        fanout.fan_out(campaign.pk)
    made = dict(Notification.objects.filter(campaign=campaign).values_list("state").annotate(n=Count("id")))
    totals = metric_counters.totals()
    assert sum(made.values()) == totals["accepted", "standard"] == 3
    assert {state: totals["state", "standard", state] for state in made} == made

    with django_capture_on_commit_callbacks(execute=True):
        actions.cancel(campaign, marketer)
    cancelled = Notification.objects.filter(campaign=campaign, state=State.CANCELLED).count()
    assert cancelled and metric_counters.totals()["state", "standard", "cancelled"] == cancelled


def test_without_redis_the_totals_are_kept_in_the_database(
    send, smtp_sink, django_capture_on_commit_callbacks, settings
):
    settings.REDIS_URL = ""
    with django_capture_on_commit_callbacks(execute=True):
        accepted = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "7"}}, key="k-1")
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.deliver(accepted.json()["id"])
    with django_capture_on_commit_callbacks(execute=True):
        send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "8"}}, key="k-2")

    stored = dict(MetricCounter.objects.values_list("name", "value"))
    assert (stored["accepted|standard"], stored["state|standard|sent"], stored["attempt|smtp|sent"]) == (2, 1, 1)
    assert metric_counters.totals()["accepted", "standard"] == 2


def test_a_count_that_fails_never_fails_the_change_it_counts(send, django_capture_on_commit_callbacks, monkeypatch):
    def broken(counts):
        raise RuntimeError("the store is broken")

    monkeypatch.setattr(metric_counters, "_store", broken)
    with django_capture_on_commit_callbacks(execute=True):
        answer = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "7"}}, key="k-1")
    assert answer.status_code == 202 and Notification.objects.filter(pk=answer.json()["id"]).exists()


@pytest.mark.usefixtures("stub_providers")
def test_a_batch_whose_calls_fail_counts_its_claims_and_failures_without_a_query_per_row(
    send, stub_providers, settings, django_capture_on_commit_callbacks
):
    """The rows a batch loads leave ``provider`` unread: counting their failures must not fetch it row by row."""
    settings.NOTIFY = {**settings.NOTIFY, "BREAKER_CONSECUTIVE_FAILURES": 1000, "BREAKER_ERROR_RATE": 1.01}
    stub_providers.state.faults = {"twilio": {"error_rate": 1.0, "error": "500"}}
    ids = queued_sms(send, 40)
    caller = batch.Caller()
    try:
        with CaptureQueriesContext(connection) as queries, django_capture_on_commit_callbacks(execute=True):
            batch.deliver_batch(ids, "standard", caller)
    finally:
        caller.close()

    deferred_load = '"notifications_notification"."provider" FROM'
    provider_reads = [query["sql"] for query in queries.captured_queries if deferred_load in query["sql"]]
    totals = metric_counters.totals()
    assert set(Notification.objects.filter(pk__in=ids).values_list("state", flat=True)) == {State.QUEUED}  # retries
    assert (provider_reads, totals["state", "standard", "sending"], totals["attempt", "twilio", "transient"]) == (
        [],
        40,
        40,
    )
    assert totals["state", "standard", "queued"] == 40  # each retry (the rows were made outside the capture)
