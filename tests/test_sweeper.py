"""The sweeper's three rules, with time frozen."""

from datetime import timedelta

import pytest
from django.utils import timezone

from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Notification, State
from backend.notifications.queues import HUEYS
from tests.conftest import pending

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def make(send):
    def _make(order: str, **fields) -> Notification:
        response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": order}}, key=f"o-{order}")
        Notification.objects.filter(pk=response.json()["id"]).update(**fields)
        return Notification.objects.get(pk=response.json()["id"])

    return _make


def test_it_requeues_sending_rows_past_the_visibility_timeout(make, settings):
    now = timezone.now()
    timeout = settings.NOTIFY["VISIBILITY_TIMEOUT"]
    stale = make("1", state=State.SENDING, sending_at=now - timedelta(seconds=timeout + 1))
    fresh = make("2", state=State.SENDING, sending_at=now - timedelta(seconds=timeout - 1))

    report = sweep(now)

    assert (report.stale_sending, report.stale_queued, report.due_scheduled) == (1, 0, 0)
    stale.refresh_from_db()
    fresh.refresh_from_db()
    assert (stale.state, stale.reason) == (State.QUEUED, "visibility-timeout")
    assert fresh.state == State.SENDING
    assert pending("standard") == 1


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
