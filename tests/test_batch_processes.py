"""Batch workers as real processes (``run_worker standard``, deploy/Procfile): kill -9 with a claimed batch in flight.

At-least-once with batches: every notification of the killed worker's batch is recovered by the
sweeper once its lease expires, and the providers see no more duplicates than the calls that were
in flight (they had no sent-marker yet).
"""

import time
from collections import Counter

import pytest

from backend.notifications.models import Attempt, Notification, State
from backend.notifications.tasks import enqueue_deliveries
from tests import test_delivery_batches as delivery_batches
from tests.processes import Processes, wait_until, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

BATCH = 10


def queued_sms(send, count: int) -> list[str]:
    """``count`` queued standard SMS to Sam, handed to the standard queue as the accept side does."""
    ids = delivery_batches.queued_sms(send, count, user_id="u-en-1")
    enqueue_deliveries(ids[1:], "standard")
    return ids


def test_a_batch_worker_killed_with_a_claimed_batch_loses_nothing_and_duplicates_at_most_that_batch(
    send, smtp_sink, stub_providers, settings
):
    # Calls take 1.5 s: the worker is killed while its whole batch is at the provider.
    stub_providers.state.faults = {"twilio": {"latency_ms": 1500}}
    env = worker_env(
        smtp_sink.port, NOTIFY_PROVIDERS_FILE=settings.NOTIFY["PROVIDERS_FILE"], NOTIFY_STANDARD_LEASE="1",
        NOTIFY_SWEEP_INTERVAL="0.2", NOTIFY_VISIBILITY_TIMEOUT="1", LOG_LEVEL="WARNING",
    )  # fmt: skip
    processes = Processes(env)
    ids = queued_sms(send, 3 * BATCH)
    try:
        worker = processes.start("run_worker", "standard", "--workers", "1", "--batch", str(BATCH))
        wait_until(lambda: Attempt.objects.filter(notification__in=ids).count() == BATCH, 30, "a batch at the provider")
        processes.kill(worker)
        in_flight = set(map(str, Attempt.objects.filter(notification__in=ids).values_list("notification", flat=True)))
        assert Notification.objects.filter(pk__in=in_flight, state=State.SENDING).count() == BATCH

        stub_providers.state.faults = {}
        processes.start("run_scheduler")
        processes.start("run_worker", "standard", "--workers", "1", "--batch", str(BATCH))
        wait_until(
            lambda: Notification.objects.filter(pk__in=ids, state=State.SENT).count() == len(ids),
            60,
            "every notification sent after recovery",
        )
    finally:
        processes.stop_all()
    time.sleep(1.6)  # let the dead worker's calls land at the stub too

    texts = Counter(m["text"] for m in stub_providers.state.messages)
    assert len(texts) == len(ids)  # every notification reached the provider
    assert sum(n - 1 for n in texts.values()) <= BATCH  # duplicates: at most the batch in flight
    for pk in in_flight:
        reasons = Notification.objects.get(pk=pk).state_changes.values_list("to_state", "reason")
        assert (State.QUEUED, "lease-expired") in list(reasons)  # the sweeper handed it out again
        attempts = list(Attempt.objects.filter(notification_id=pk).values_list("result", flat=True))
        assert attempts == ["", "sent"]  # the cut call stays on record without a result
