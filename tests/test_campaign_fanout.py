"""The fan-out (campaigns/fanout.py): one notification per recipient, policy applied set-based, resumable, fed, done."""

import os
import threading
import uuid
from datetime import timedelta
from unittest import mock

import pytest
from django.core.management import call_command
from django.utils import timezone

from backend.notifications import masking
from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Kind, Notification, Preference, Recipient, State, StateChange
from backend.notifications.queues import HUEYS
from backend.notifications.tasks import enqueue_delivery
from campaigns import actions, fanout
from campaigns.models import Campaign, CampaignAudit, ScheduleMode
from tests import processes as spawn
from tests.campaigns_setup import list_segment, submitted

AUDIENCE = 50


@pytest.fixture
def audience(demo_data) -> list[str]:
    """50 recipients: Arabic, English and one French speaker; one opted out, one without email, one bounced."""
    now = timezone.now()
    Recipient.objects.bulk_create(
        Recipient(
            user_id=f"fan-{n:02d}",
            email="" if n == 7 else f"fan{n}@example.com",
            email_bounced_at=now if n == 8 else None,
            language="fr" if n == 9 else "ar" if n % 2 else "en",
        )
        for n in range(AUDIENCE)
    )
    opted_out = Recipient.objects.get(user_id="fan-06")
    Preference.objects.create(recipient=opted_out, kind=Kind.objects.get(name="promo"), channel="email", enabled=False)
    return [f"fan-{n:02d}" for n in range(AUDIENCE)]


@pytest.fixture
def running(audience, marketer, approver) -> Campaign:
    """An approved promo email campaign to ``audience``, started by the scheduler."""
    campaign = submitted(marketer, segment=list_segment(audience, name="Fan-out audience"))
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    assert actions.start(campaign)
    return campaign


def made(campaign: Campaign) -> list[Notification]:
    return list(Notification.objects.filter(campaign=campaign).select_related("recipient", "template_version"))


def test_each_recipient_gets_exactly_one_notification_keyed_by_campaign_and_user(running, audience):
    report = fanout.fan_out(running.pk)

    rows = made(running)
    assert report == fanout.FanOut(batches=1, created=AUDIENCE, complete=True)
    assert sorted(n.recipient.user_id for n in rows) == audience
    assert {n.idempotency_key for n in rows} == {f"campaign:{running.pk}:{user_id}" for user_id in audience}
    assert {n.idempotency_scope for n in rows} == {f"campaign:{running.pk}"}
    assert {(n.priority, n.channel, n.kind.name, n.queued_at) for n in rows} == {("standard", "email", "promo", None)}
    running.refresh_from_db()
    assert running.fanned_out_at is not None


def test_ids_are_uuid7_whose_time_is_when_the_fan_out_ran(running):
    before = int(timezone.now().timestamp() * 1000)
    fanout.fan_out(running.pk)
    after = int(timezone.now().timestamp() * 1000)

    ids = [n.id for n in made(running)]
    assert {(i.version, i.variant) for i in ids} == {(7, uuid.RFC_4122)}
    assert all(before <= i.int >> 80 <= after for i in ids)  # RFC 9562 §5.7: the top 48 bits are Unix ms
    assert len({i.int & (2**62 - 1) for i in ids}) == AUDIENCE  # the random low bits differ


def test_opaque_codes_compare_bytewise_on_postgresql(db):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attname, collname FROM pg_attribute JOIN pg_collation c ON c.oid = attcollation"
            " WHERE attrelid = %s::regclass AND attname IN"
            " ('idempotency_scope', 'idempotency_key', 'state', 'priority', 'provider', 'provider_ref', 'reason')",
            [Notification._meta.db_table],
        )
        collations = dict(cursor.fetchall())
    assert collations == {
        "idempotency_scope": "C", "idempotency_key": "C", "state": "C", "priority": "C", "provider": "C",
        "provider_ref": "C", "reason": "default",
    }  # fmt: skip


def test_the_policy_stops_are_recorded_with_their_reasons(running):
    fanout.fan_out(running.pk)

    outcome = {n.recipient.user_id: (n.state, n.reason) for n in made(running)}
    assert outcome.pop("fan-06") == ("suppressed", "opted-out")
    assert outcome.pop("fan-07") == ("suppressed", "no-address")
    assert outcome.pop("fan-08") == ("suppressed", "address-disabled")
    assert set(outcome.values()) == {("queued", "")}
    history = StateChange.objects.filter(notification__campaign=running)
    assert sorted(history.values_list("notification__recipient__user_id", "from_state", "to_state", "reason"))[6:9] == [
        ("fan-06", "", "suppressed", "opted-out"),
        ("fan-07", "", "suppressed", "no-address"),
        ("fan-08", "", "suppressed", "address-disabled"),
    ]
    assert history.count() == AUDIENCE


def test_each_language_gets_its_template_and_one_preview_rendered_for_it(running):
    fanout.fan_out(running.pk)

    by_user = {n.recipient.user_id: n for n in made(running)}
    arabic, english, french = by_user["fan-01"], by_user["fan-02"], by_user["fan-09"]
    assert arabic.template_version.language == "ar"
    assert english.template_version.language == "en"
    assert french.template_version_id == english.template_version_id  # no French: the kind's default language
    expected = masking.masked_preview(arabic.template_version, running.kind, running.params)
    assert arabic.preview == expected and "20" in expected
    assert arabic.params == {"percent": "20"}


def test_running_it_again_makes_no_duplicate(running):
    fanout.fan_out(running.pk)
    Campaign.objects.filter(pk=running.pk).update(fanned_out_at=None)

    again = fanout.fan_out(running.pk)
    # The whole range once more: the UNIQUE key, not the resume point, is the guarantee.
    with fanout.transaction.atomic():
        replayed = fanout._insert_batch(fanout.make_plan(running), 0, Recipient.objects.order_by("-pk").first().pk)

    assert again == fanout.FanOut(batches=0, created=0, complete=True)
    assert replayed == 0
    assert Notification.objects.filter(campaign=running).count() == AUDIENCE
    assert StateChange.objects.filter(notification__campaign=running).count() == AUDIENCE


def test_a_crash_after_the_first_batch_resumes_with_every_recipient_once(running, audience):
    real_insert = fanout._insert_batch
    calls = []

    def crash_on_second_batch(*args):
        calls.append(args)
        if len(calls) == 2:
            raise ConnectionError("scheduler killed")
        return real_insert(*args)

    with mock.patch.object(fanout, "_insert_batch", crash_on_second_batch), pytest.raises(ConnectionError):
        fanout.fan_out(running.pk, batch=20)
    assert Notification.objects.filter(campaign=running).count() == 20

    resumed = fanout.fan_out(running.pk, batch=20)

    assert resumed == fanout.FanOut(batches=2, created=30, complete=True)
    assert sorted(n.recipient.user_id for n in made(running)) == audience


def test_a_cancelled_campaign_stops_between_batches(running, marketer):
    fanout.fan_out(running.pk, batch=20, max_batches=1)
    actions.cancel(running, marketer)

    report = fanout.fan_out(running.pk, batch=20)

    assert report == fanout.FanOut(batches=0, created=0, complete=False)
    assert Notification.objects.filter(campaign=running).count() == 20
    assert fanout.feed(limit=100) == 0


def test_the_feeder_keeps_at_most_its_limit_of_campaign_tasks_in_redis(running):
    fanout.fan_out(running.pk)
    queue = HUEYS["standard"]

    assert fanout.feed(limit=10) == 10
    assert fanout.feed(limit=10) == 0  # the queue already holds 10
    assert queue.pending_count() == 10
    fed = Notification.objects.filter(campaign=running, queued_at__isnull=False)
    assert fed.count() == 10 and set(fed.values_list("state", flat=True)) == {"queued"}
    task = queue.dequeue()
    assert task.priority == fanout.CAMPAIGN_PRIORITY
    assert fanout.feed(limit=10) == 1


def test_the_feeder_hands_over_in_one_redis_call_tasks_a_worker_reads_after_transactional_ones(running):
    fanout.fan_out(running.pk)
    queue = HUEYS["standard"]
    assert fanout.feed(limit=3) == 3
    enqueue_delivery("transactional-1", "standard")  # a service's own notification, after the campaign's

    popped = [queue.dequeue() for _ in range(4)]

    assert [task.args for task in popped[:1]] == [("transactional-1",)]
    fed = {
        str(pk)
        for pk in Notification.objects.filter(campaign=running, queued_at__isnull=False).values_list("pk", flat=True)
    }
    assert {task.args[0] for task in popped[1:]} == fed and len(fed) == 3
    assert {(task.name, task.priority) for task in popped[1:]} == {("deliver", fanout.CAMPAIGN_PRIORITY)}
    assert queue.dequeue() is None


def test_it_is_done_when_nothing_is_left_to_send(running):
    fanout.fan_out(running.pk, batch=20, max_batches=1)
    Notification.objects.filter(campaign=running, state=State.QUEUED).update(state=State.SENT)
    assert fanout.finish_done() == []  # the fan-out has not finished

    fanout.fan_out(running.pk, batch=20)
    assert fanout.finish_done() == []  # queued rows are left
    Notification.objects.filter(campaign=running, state=State.QUEUED).update(state=State.SENT)

    assert fanout.finish_done() == [running.pk]
    running.refresh_from_db()
    assert running.state == "done"
    done = CampaignAudit.objects.get(campaign=running, action="done")
    assert (done.actor_name, done.detail) == ("scheduler", {"counts": {"sent": 47, "suppressed": 3}})


def test_the_scheduler_starts_due_campaigns_only(audience, marketer, approver):
    later = timezone.now() + timedelta(hours=1)
    segment = list_segment(audience, name="Fan-out audience")
    now_campaign, later_campaign = (
        actions.approve(c, approver, c.content_hash)
        for c in (
            submitted(marketer, segment=segment),
            submitted(marketer, segment=segment, schedule_mode=ScheduleMode.AT, send_at=later),
        )
    )

    call_command("run_scheduler", "--once")

    now_campaign.refresh_from_db()
    later_campaign.refresh_from_db()
    assert (now_campaign.state, later_campaign.state) == ("running", "approved")
    assert CampaignAudit.objects.filter(campaign=now_campaign, action="start", actor_name="scheduler").exists()
    assert Notification.objects.filter(campaign=now_campaign).count() == AUDIENCE
    assert HUEYS["standard"].pending_count() == AUDIENCE - 3
    assert fanout.start_due(later + timedelta(seconds=1)) == [later_campaign.pk]


# The fan-out in a process of its own, each batch held open 0.3 s before its commit, so a kill lands mid-way.
SLOW_FAN_OUT = """
import time
from campaigns import fanout
real_insert = fanout._insert_batch
def slow_insert(*args):
    made = real_insert(*args)
    time.sleep(0.3)
    return made
fanout._insert_batch = slow_insert
fanout.fan_out({campaign_id}, batch=10)
"""


@pytest.mark.django_db(transaction=True)
def test_a_fan_out_killed_mid_way_resumes_with_every_recipient_once(running, audience, settings):
    env = {**os.environ, "DATABASE_URL": spawn.test_database_url(), "REDIS_URL": settings.REDIS_URL}
    processes = spawn.Processes(env)
    try:
        child = processes.start("shell", "-c", SLOW_FAN_OUT.format(campaign_id=running.pk))
        spawn.wait_until(
            lambda: Notification.objects.filter(campaign=running).count() >= 20, 30, "two batches committed"
        )
        processes.kill(child)
    finally:
        processes.stop_all()
    before = Notification.objects.filter(campaign=running).count()
    assert 20 <= before < AUDIENCE

    resumed = fanout.fan_out(running.pk, batch=10)

    assert resumed.complete and resumed.created == AUDIENCE - before
    assert sorted(n.recipient.user_id for n in made(running)) == audience
    assert StateChange.objects.filter(notification__campaign=running).count() == AUDIENCE


def _recording_threads(calls: list[int]):
    """``_insert_batch`` that also records which thread (so which connection) made each batch."""
    real_insert = fanout._insert_batch

    def insert(*args):
        calls.append(threading.get_ident())
        return real_insert(*args)

    return insert


@pytest.mark.django_db(transaction=True)
def test_batches_made_two_at_a_time_on_two_connections_give_every_recipient_one_with_its_history(running, audience):
    threads: list[int] = []
    with mock.patch.object(fanout, "_insert_batch", _recording_threads(threads)):
        report = fanout.fan_out(running.pk, batch=10, parallel=2)

    running.refresh_from_db()
    assert report == fanout.FanOut(batches=5, created=AUDIENCE, complete=True)
    assert len(set(threads)) == 2  # the second batch of each round on a connection of its own
    assert sorted(n.recipient.user_id for n in made(running)) == audience
    assert StateChange.objects.filter(notification__campaign=running).count() == AUDIENCE
    assert running.fanout_last_recipient == Recipient.objects.get(user_id=audience[-1]).pk
    assert running.fanned_out_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_crash_after_a_parallel_round_committed_but_before_its_mark_moved_makes_each_recipient_once(
    running, audience
):
    real_round = fanout._round

    def committed_then_killed(*args):
        real_round(*args)
        raise ConnectionError("scheduler killed before the mark moved")

    with mock.patch.object(fanout, "_round", committed_then_killed), pytest.raises(ConnectionError):
        fanout.fan_out(running.pk, batch=10, parallel=2)
    running.refresh_from_db()
    assert (running.fanout_last_recipient, Notification.objects.filter(campaign=running).count()) == (0, 20)

    resumed = fanout.fan_out(running.pk, batch=10, parallel=2)

    assert resumed == fanout.FanOut(batches=5, created=AUDIENCE - 20, complete=True)
    assert sorted(n.recipient.user_id for n in made(running)) == audience
    assert StateChange.objects.filter(notification__campaign=running).count() == AUDIENCE


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_campaign_stops_parallel_rounds(running, marketer):
    fanout.fan_out(running.pk, batch=10, max_batches=2, parallel=2)
    actions.cancel(running, marketer)

    report = fanout.fan_out(running.pk, batch=10, parallel=2)

    assert report == fanout.FanOut(batches=0, created=0, complete=False)
    assert Notification.objects.filter(campaign=running).count() == 20


def test_the_sweeper_leaves_rows_not_yet_fed_alone(running, settings):
    """A million rows waiting in PostgreSQL are not "tasks lost by Redis": only fed rows are the sweeper's."""
    fanout.fan_out(running.pk)
    fanout.feed(limit=10)
    long_ago = timezone.now() - timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"] + 1)
    Notification.objects.filter(campaign=running, queued_at__isnull=False).update(queued_at=long_ago)

    report = sweep(tiers=["standard"])

    assert report.stale_queued == 0  # each fed row still has its task in the queue
    assert HUEYS["standard"].pending_count() == 10
