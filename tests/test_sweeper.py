"""The sweeper's three rules, with time frozen."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Notification, State
from backend.notifications.queues import HUEYS
from tests.conftest import pending
from tests.plans_setup import analyze, copies_of, plan_of

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def make(send):
    def _make(order: str, **fields) -> Notification:
        response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": order}}, key=f"o-{order}")
        Notification.objects.filter(pk=response.json()["id"]).update(**fields)
        return Notification.objects.get(pk=response.json()["id"])

    return _make


def test_it_requeues_sending_rows_whose_lease_expired_and_leaves_a_renewed_one(make):
    now = timezone.now()
    dead = make("1", state=State.SENDING, sending_at=now - timedelta(seconds=5), lease_until=now - timedelta(seconds=1))
    # A live worker on a slow provider call: claimed long ago, its heartbeat keeps the lease ahead.
    slow = make("2", state=State.SENDING, sending_at=now - timedelta(hours=1), lease_until=now + timedelta(seconds=1))

    report = sweep(now)

    assert (report.stale_sending, report.stale_queued, report.due_scheduled) == (1, 0, 0)
    dead.refresh_from_db()
    slow.refresh_from_db()
    assert (dead.state, dead.reason) == (State.QUEUED, "lease-expired")
    assert slow.state == State.SENDING
    assert pending("standard") == 1


def test_a_claim_taken_before_leases_existed_is_freed_after_the_visibility_timeout(make, settings):
    now = timezone.now()
    timeout = settings.NOTIFY["VISIBILITY_TIMEOUT"]
    stale = make("1", state=State.SENDING, sending_at=now - timedelta(seconds=timeout + 1), lease_until=None)
    fresh = make("2", state=State.SENDING, sending_at=now - timedelta(seconds=timeout - 1), lease_until=None)

    assert sweep(now).stale_sending == 1
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.state, fresh.state) == (State.QUEUED, State.SENDING)


def test_the_high_tier_sweep_finds_an_otp_whose_task_was_lost_within_seconds(make, send, settings):
    now = timezone.now()
    lost = now - timedelta(seconds=settings.NOTIFY["HIGH_VISIBILITY_TIMEOUT"] + 1)
    response = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1")
    Notification.objects.filter(pk=response.json()["id"]).update(queued_at=lost)
    make("1", queued_at=lost)  # a standard row as old: not yet past the standard tier's timeout

    report = sweep(now, tiers=["high"])

    assert (report.stale_sending, report.stale_queued, report.due_scheduled) == (0, 1, 0)
    assert (pending("high"), pending("standard")) == (1, 0)


def test_a_high_tier_sweep_leaves_the_standard_tier_to_its_own(make):
    now = timezone.now()
    make("1", state=State.SENDING, lease_until=now - timedelta(seconds=1))
    make("2", state=State.SCHEDULED, send_at=now - timedelta(seconds=1))

    report = sweep(now, tiers=["high"])

    assert (report.stale_sending, report.stale_queued, report.due_scheduled) == (0, 0, 0)
    assert sweep(now, tiers=["standard"]).stale_sending == 1


def test_it_reenqueues_queued_rows_past_the_timeout_once_per_timeout(make, settings):
    now = timezone.now()
    timeout = settings.NOTIFY["VISIBILITY_TIMEOUT"]
    make("1", queued_at=now - timedelta(seconds=timeout + 5))
    make("2", queued_at=now)

    assert sweep(now).stale_queued == 1
    assert sweep(now + timedelta(seconds=1)).stale_queued == 0
    assert pending("standard") == 1


def test_a_backlog_whose_tasks_are_all_in_the_queue_is_left_alone(make, settings, django_capture_on_commit_callbacks):
    now = timezone.now()
    timeout = settings.NOTIFY["VISIBILITY_TIMEOUT"]
    with django_capture_on_commit_callbacks(execute=True):
        make("1", queued_at=now - timedelta(seconds=timeout + 5))
        make("2", queued_at=now - timedelta(seconds=timeout + 5))
    assert pending("standard") == 2  # a long backlog: old, but its tasks are there
    assert sweep(now).stale_queued == 0
    HUEYS["standard"].flush()  # Redis lost them
    assert sweep(now).stale_queued == 2
    assert pending("standard") == 2


def test_it_releases_scheduled_rows_whose_time_has_come(make):
    now = timezone.now()
    due = make("1", state=State.SCHEDULED, send_at=now - timedelta(seconds=1))
    later = make("2", state=State.SCHEDULED, send_at=now + timedelta(hours=1))

    assert sweep(now).due_scheduled == 1
    due.refresh_from_db()
    later.refresh_from_db()
    assert (due.state, due.reason) == (State.QUEUED, "send-at-reached")
    assert later.state == State.SCHEDULED


def test_sent_and_failed_rows_are_never_touched(make):
    long_ago = timezone.now() - timedelta(days=1)
    make("1", state=State.SENT, queued_at=long_ago, sending_at=long_ago)
    make("2", state=State.FAILED, queued_at=long_ago, sending_at=long_ago)
    report = sweep()
    assert (report.stale_sending, report.stale_queued, report.due_scheduled) == (0, 0, 0)


def test_the_scan_for_queued_rows_without_a_task_reads_the_oldest_through_the_queue_index(make, settings):
    """20,000 sent rows, then 20,000 queued whose tasks Redis lost: the sweep reads 1,000 by the queue's index."""
    now = timezone.now()
    stale = make("1", queued_at=now - timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"] + 5))
    copies = copies_of(stale, 20_000, "s", state=State.SENT) + copies_of(stale, 19_999, "q")
    Notification.objects.bulk_create(copies, batch_size=5000)
    analyze()
    HUEYS["standard"].flush()

    with CaptureQueriesContext(connection) as captured:
        assert sweep(now).stale_queued == 1000
    [scan] = [
        q["sql"] for q in captured.captured_queries if 'queued_at" <' in q["sql"] and q["sql"].startswith("SELECT")
    ]
    plan = plan_of(scan)
    # Unordered, LIMIT 1000 looked cheapest as a seq scan that stops at the thousandth match; the matches were
    # the last rows written, so it read every row before them (121 ms at 1,000,000 rows).
    assert "notification_tier_queue_idx" in plan and "Seq Scan" not in plan, plan
