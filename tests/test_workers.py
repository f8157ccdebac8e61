"""Worker pools as real processes: work queued while they are down, a worker killed mid-send, Redis emptied.

At-least-once (DESIGN.md §2): the row in PostgreSQL is the truth, the queue
only a hint; the scheduler's sweeper re-enqueues what a dead worker or an
emptied Redis lost.
"""

import time

import pytest

from backend.notifications.models import Attempt, Notification, State
from backend.notifications.queues import HUEYS
from tests.conftest import pending
from tests.processes import Processes, wait_until, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]


@pytest.fixture
def processes(smtp_sink):
    env = worker_env(
        smtp_sink.port, NOTIFY_VISIBILITY_TIMEOUT="1", NOTIFY_SWEEP_INTERVAL="0.2", NOTIFY_STANDARD_LEASE="1"
    )
    procs = Processes(env)
    yield procs
    procs.stop_all()


def shipped(send, user_id: str, order: str) -> str:
    response = send({"user_id": user_id, "kind": "shipped", "params": {"order": order}}, key=f"order-{order}-shipped")
    assert response.status_code == 202
    return response.json()["id"]


def states(ids) -> dict[str, str]:
    return {str(pk): state for pk, state in Notification.objects.filter(pk__in=ids).values_list("pk", "state")}


def all_sent(ids) -> bool:
    return set(states(ids).values()) == {State.SENT}


def test_work_queued_while_workers_are_down_is_delivered_when_they_start(send, processes, smtp_sink):
    ids = [shipped(send, "u-ar-1", "1001"), shipped(send, "u-en-1", "1002")]
    otp = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1").json()["id"]
    ids.append(otp)
    assert (pending("standard"), pending("high")) == (2, 1)
    assert set(states(ids).values()) == {State.QUEUED}

    processes.start("run_worker", "high")
    processes.start("run_worker", "standard")
    wait_until(lambda: all_sent(ids), 30, "every notification sent")

    assert sorted(mail["To"] for mail in smtp_sink.wait_for(2)) == ["layla@example.com", "sam@example.com"]
    assert Notification.objects.get(pk=otp).provider == "fake-sms"
    assert Attempt.objects.count() == 3


def test_a_worker_killed_mid_send_loses_nothing_and_sends_once(send, processes, smtp_sink):
    # The relay stalls on RCPT TO, so the worker is inside the provider call when it dies.
    smtp_sink.rules.delays["layla@example.com"] = 30
    worker = processes.start("run_worker", "standard")
    pk = shipped(send, "u-ar-1", "2001")
    wait_until(lambda: Attempt.objects.filter(notification_id=pk).exists(), 30, "the provider call to start")

    processes.kill(worker)
    assert states([pk]) == {pk: State.SENDING}

    del smtp_sink.rules.delays["layla@example.com"]
    processes.start("run_scheduler")
    processes.start("run_worker", "standard")
    wait_until(lambda: all_sent([pk]), 30, "the notification sent after recovery")

    assert len(smtp_sink.wait_for(1)) == 1
    notification = Notification.objects.get(pk=pk)
    history = list(notification.state_changes.values_list("from_state", "to_state", "reason"))
    assert history == [
        ("", "queued", ""),
        ("queued", "sending", ""),
        ("sending", "queued", "lease-expired"),
        ("queued", "sending", ""),
        ("sending", "sent", ""),
    ]
    # The first attempt never came back: it stays on record without a result.
    assert list(notification.attempts.values_list("number", "result")) == [(1, ""), (2, "sent")]


def test_notifications_survive_redis_restarting_empty(send, processes, smtp_sink):
    ids = [shipped(send, "u-ar-1", "3001"), shipped(send, "u-en-1", "3002")]
    HUEYS["standard"].storage.conn.flushall()
    assert pending("standard") == 0

    processes.start("run_scheduler")
    processes.start("run_worker", "standard")
    wait_until(lambda: all_sent(ids), 30, "every notification sent")
    assert len(smtp_sink.wait_for(2)) == 2
    for pk in ids:
        history = Notification.objects.get(pk=pk).state_changes.values_list("to_state", flat=True)
        assert list(history) == ["queued", "sending", "sent"]


def test_a_worker_killed_between_the_provider_call_and_the_status_write_duplicates_at_most_once(
    send, smtp_sink, stub_providers, settings
):
    """The stub accepts the OTP after the worker is already dead: the row says sending, the provider has it.

    Recovery re-sends (the sent-marker was never written), so Layla may get the code twice, never zero times.
    """
    stub_providers.state.faults = {"twilio": {"latency_ms": 1500}}
    procs = Processes(
        worker_env(
            smtp_sink.port,
            NOTIFY_PROVIDERS_FILE=settings.NOTIFY["PROVIDERS_FILE"],
            NOTIFY_HIGH_SWEEP_INTERVAL="0.2",
        )
    )
    try:
        worker = procs.start("run_worker", "high")
        response = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "481516"}}, key="login-kill")
        pk = response.json()["id"]
        wait_until(lambda: Attempt.objects.filter(notification_id=pk).exists(), 30, "the provider call to start")
        procs.kill(worker)
        assert states([pk]) == {pk: State.SENDING}

        stub_providers.state.faults = {}
        procs.start("run_scheduler")
        procs.start("run_worker", "high")
        wait_until(lambda: all_sent([pk]), 30, "the OTP sent after recovery")
    finally:
        procs.stop_all()
    time.sleep(1.6)  # let the dead worker's call land at the stub too
    received = [m for m in stub_providers.state.messages if m["to"] == "+966501234567"]
    assert 1 <= len(received) <= 2
    assert list(Notification.objects.get(pk=pk).attempts.values_list("result", flat=True)) == ["", "sent"]
