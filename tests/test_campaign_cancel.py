"""Cancel (campaigns/actions.cancel): every row not yet handed over ends cancelled, at once, and no worker sends it."""

import threading
import time
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications import actions as notification_actions
from backend.notifications.actions.accept import SendRequest, accept
from backend.notifications.models import Attempt, Notification, Recipient, State, StateChange
from backend.notifications.queues import HUEYS
from backend.notifications.tasks import enqueue_delivery
from campaigns import actions, fanout, ledger, row_moves
from campaigns.models import Campaign, CampaignAudit
from tests.campaigns_setup import list_segment, submitted
from tests.plans_setup import analyze, copies_in_sql, plan_of
from tests.processes import Processes, wait_until, worker_env

AUDIENCE = 30


@pytest.fixture
def audience(demo_data) -> list[str]:
    """30 English recipients with an email address each."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"cx-{n:02d}", email=f"cx{n}@example.com", language="en") for n in range(AUDIENCE)
    )
    return [f"cx-{n:02d}" for n in range(AUDIENCE)]


@pytest.fixture
def running(audience, marketer, approver) -> Campaign:
    """An approved promo email campaign to ``audience``, started, its first 20 recipients fanned out."""
    campaign = submitted(marketer, segment=list_segment(audience, name="Cancel audience"))
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    assert actions.start(campaign)
    fanout.fan_out(campaign.pk, batch=20, max_batches=1)
    return campaign


def rows(campaign: Campaign, state: str):
    return Notification.objects.filter(campaign=campaign, state=state).order_by("recipient__user_id")


def test_cancel_stops_every_row_not_yet_handed_over_and_records_the_counts(running, approver):
    queued = list(rows(running, State.QUEUED))
    sent, sending, scheduled = queued[:5], queued[5:7], queued[7:8]
    Notification.objects.filter(pk__in=[n.pk for n in sent]).update(state=State.SENT, sent_at=timezone.now())
    Notification.objects.filter(pk__in=[n.pk for n in sending]).update(state=State.SENDING)
    Notification.objects.filter(pk__in=[n.pk for n in scheduled]).update(state=State.SCHEDULED)

    cancelled = actions.cancel(running, approver)

    assert cancelled.state == Campaign.State.CANCELLED and cancelled.cancelled_at is not None
    assert ledger.counts(running) == {**{s: 0 for s in State.values}, "sent": 5, "sending": 2, "cancelled": 13}
    assert set(rows(running, State.CANCELLED).values_list("reason", flat=True)) == {"campaign-cancelled"}
    history = StateChange.objects.filter(notification__campaign=running, to_state=State.CANCELLED)
    assert sorted(history.order_by().values_list("from_state", "reason").distinct()) == [
        ("queued", "campaign-cancelled"),
        ("scheduled", "campaign-cancelled"),
    ]
    assert history.count() == 13
    audit = CampaignAudit.objects.get(campaign=running, action="cancel")
    assert (audit.actor_name, audit.detail) == (
        "approver",
        {
            "from_state": "running",
            "sent": 5,
            "cancelled": 13,
            "in_flight": 2,
            "counts": {"sent": 5, "sending": 2, "cancelled": 13},
        },
    )


def test_no_row_is_made_after_the_cancel(running, marketer):
    actions.cancel(running, marketer)

    assert fanout.fan_out(running.pk, batch=20) == fanout.FanOut(batches=0, created=0, complete=False)
    assert fanout.tick(batch=20) is False
    assert Notification.objects.filter(campaign=running).count() == 20
    assert set(Notification.objects.filter(campaign=running).values_list("state", flat=True)) == {State.CANCELLED}


@pytest.mark.django_db(transaction=True)
def test_a_worker_hands_over_nothing_of_a_cancelled_row_whose_task_was_already_in_redis(running, marketer, smtp_sink):
    # A control the worker must send, created first and then queued behind the campaign's tasks.
    control = accept(SendRequest("order-1-shipped", "u-en-1", "shipped", {"order": "1"}, "email", None, None), None)
    HUEYS["standard"].flush()
    assert fanout.feed(limit=5) == 5
    actions.cancel(running, marketer)
    enqueue_delivery(str(control.notification.pk), "standard", priority=fanout.CAMPAIGN_PRIORITY - 1)
    assert HUEYS["standard"].pending_count() == 6

    processes = Processes(worker_env(smtp_sink.port))
    try:
        processes.start("run_worker", "standard", "--workers", "1")
        wait_until(
            lambda: Notification.objects.get(pk=control.notification.pk).state == State.SENT, 30, "the control sent"
        )
    finally:
        processes.stop_all()

    assert [mail["To"] for mail in smtp_sink.messages()] == ["sam@example.com"]
    assert Attempt.objects.filter(notification__campaign=running).count() == 0
    assert ledger.counts(running)[State.CANCELLED] == 20


def test_a_row_claimed_before_the_cancel_is_in_flight_and_counted_by_how_it_ends(running, marketer):
    fanout.feed(limit=AUDIENCE)  # a worker claims a campaign's row only once it was fed
    first, second = rows(running, State.QUEUED)[:2]
    assert notification_actions.claim(first) and notification_actions.claim(second)

    actions.cancel(running, marketer)
    assert not notification_actions.claim(rows(running, State.CANCELLED).first())  # a late task claims nothing
    notification_actions.mark_sent(first, "smtp", "ref-1")
    notification_actions.mark_failed(second, "permanent-error", "550 no such mailbox")

    split = ledger.ledger(Campaign.objects.get(pk=running.pk)).cancel
    assert (split.sent, split.sent_at_cancel, split.cancelled, split.in_flight) == (1, 0, 18, 2)
    assert split.in_flight_outcome == {"sent": 1, "failed": 1, "expired": 0, "cancelled": 0, "still_in_flight": 0}


def test_a_row_in_flight_at_the_cancel_is_not_retried_after_it(running, marketer):
    fanout.feed(limit=AUDIENCE)
    HUEYS["standard"].flush()
    first = rows(running, State.QUEUED).first()
    assert notification_actions.claim(first)
    actions.cancel(running, marketer)

    assert not notification_actions.requeue_for_retry(first, 4.0, "twilio answered 500")

    first.refresh_from_db()
    assert (first.state, first.reason, first.last_error) == (
        State.CANCELLED,
        "campaign-cancelled",
        "twilio answered 500",
    )
    assert HUEYS["standard"].scheduled_count() == 0
    split = ledger.ledger(Campaign.objects.get(pk=running.pk)).cancel
    assert (split.in_flight, split.in_flight_outcome["cancelled"], split.cancelled) == (1, 1, 19)


@pytest.mark.django_db(transaction=True)
def test_hand_over_stops_at_once_while_a_fan_out_batch_is_under_way(audience, marketer, approver):
    """The cancel stops fed rows before it waits for the batch under way, whose rows it then stops too."""
    campaign = submitted(marketer, segment=list_segment(audience, name="Cancel audience"))
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    assert actions.start(campaign)
    second_batch_made, first_stop_done, holding = threading.Event(), threading.Event(), threading.Event()
    report, stops = [], []
    real_insert, real_stop = fanout._insert_batch, ledger.stop_unsent

    def insert_then_hold(*args):
        made = real_insert(*args)
        if args[1] > 0:  # a batch after the first: keep its transaction, and the campaign's row lock, open a while
            holding.set()
            second_batch_made.set()
            time.sleep(1.0)
            holding.clear()
        return made

    def stop_then_tell(*args, **kwargs):
        stopped = real_stop(*args, **kwargs)
        stops.append(holding.is_set())
        first_stop_done.set()
        return stopped

    def in_a_thread(work):
        def run():
            try:
                work()
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    with (
        mock.patch.object(fanout, "_insert_batch", insert_then_hold),
        mock.patch.object(ledger, "stop_unsent", stop_then_tell),
    ):
        fanning = in_a_thread(lambda: report.append(fanout.fan_out(campaign.pk, batch=10)))
        assert second_batch_made.wait(10)
        # The first batch runs beside the second on a connection of its own: its commit may come a moment later.
        wait_until(lambda: rows(campaign, State.QUEUED).count() == 10, 5, "the first batch's commit")
        # The feeder handed the first batch over (the second is not committed yet): these rows have tasks.
        fed = rows(campaign, State.QUEUED).update(queued_at=timezone.now())
        cancelling = in_a_thread(lambda: actions.cancel(campaign, marketer))
        assert first_stop_done.wait(10)
        # A worker's claim of a row of the first batch now waits for the cancel, then finds the row cancelled.
        claimed = notification_actions.claim(
            rows(campaign, State.QUEUED).first() or rows(campaign, State.CANCELLED).first()
        )
        cancelling.join(10)
        fanning.join(10)

    made = Notification.objects.filter(campaign=campaign).count()
    assert fed == 10
    # The first stop came while the batch still held the campaign's lock; the second after it; the third, after
    # the commit, writes the unfed rows of the second batch (counted cancelled already).
    assert stops == [True, False, False]
    assert claimed is False
    assert report[0].complete is False and report[0].created == made
    assert ledger.counts(campaign)[State.CANCELLED] == made
    assert CampaignAudit.objects.get(campaign=campaign, action="cancel").detail["cancelled"] == made


def test_a_big_cancel_locks_only_the_fed_rows_and_the_scheduler_writes_the_rest(running, approver, monkeypatch):
    """Of 20 rows, 3 have a task: the cancel stops them and 2 more (its chunk); the other 15 follow in the tick."""
    raw = Notification.objects.filter(campaign=running)
    fed = list(rows(running, State.QUEUED)[:3].values_list("pk", flat=True))
    raw.filter(pk__in=fed).update(queued_at=timezone.now())
    monkeypatch.setattr(actions, "CANCEL_CHUNK", 2)

    running = actions.cancel(running, approver)

    assert set(raw.filter(pk__in=fed).values_list("state", flat=True)) == {State.CANCELLED}
    assert raw.filter(state=State.CANCELLED).count() == 5 and raw.filter(state=State.QUEUED).count() == 15
    # Every figure already says 20 cancelled: nothing can hand the other 15 over any more.
    assert ledger.counts(running)[State.CANCELLED] == 20
    assert CampaignAudit.objects.get(campaign=running, action="cancel").detail["cancelled"] == 20
    assert fanout.feed() == 0 and fanout.release_due() == 0
    assert fanout.fan_out(running.pk, batch=20).created == 0

    assert fanout.stop_cancelled(limit=10) == 10
    assert fanout.stop_cancelled(limit=10) == 5
    assert fanout.stop_cancelled(limit=10) == 0
    assert raw.filter(state=State.CANCELLED).count() == 20
    assert StateChange.objects.filter(notification__campaign=running, to_state=State.CANCELLED).count() == 20
    split = ledger.ledger(running).cancel
    assert (split.cancelled, split.in_flight, split.sent) == (20, 0, 0)
    assert set(split.in_flight_outcome.values()) == {0}


def test_a_move_reads_the_campaign_rows_by_key_whatever_else_is_scheduled(running):
    """Each chunk's UPDATE finds its rows by primary key, not by reading every scheduled row of the table."""
    template = rows(running, State.QUEUED).first()
    # This campaign's spread wave, and 20,000 rows of other sends waiting for their send_at.
    copies_in_sql(template, 3000, "wave", state=State.SCHEDULED)
    copies_in_sql(template, 20_000, "api", state=State.SCHEDULED, campaign=None, idempotency_scope="internal")
    analyze()

    with CaptureQueriesContext(connection) as captured:
        moved = row_moves.stop_unsent(running.pk, State.CANCELLED, "campaign-cancelled", timezone.now(), limit=1000)
    assert moved == 1000

    [move] = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("WITH moved")]
    plan = plan_of(move)
    # Before: a hash join whose other side read all 23,000 scheduled rows (a seq scan once no index had state first).
    assert "Seq Scan on notifications_notification" not in plan and "notifications_notification_pkey" in plan, plan
