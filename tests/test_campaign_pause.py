"""Pause and resume (campaigns/actions.pause, resume): nothing more is handed over, nothing is lost."""

import re
import threading
import time
from datetime import timedelta

import pytest
import time_machine
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications import actions as notification_actions
from backend.notifications.delivery import batch, dispatch, sweeper
from backend.notifications.models import Attempt, Notification, Recipient, State
from backend.notifications.queues import HUEYS
from campaigns import actions, fanout
from campaigns.models import Campaign, CampaignAudit
from tests.campaigns_setup import list_segment, submitted

AUDIENCE = 30


@pytest.fixture
def audience(demo_data) -> list[str]:
    """30 English recipients with an email address each."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"pz-{n:02d}", email=f"pz{n}@example.com", language="en") for n in range(AUDIENCE)
    )
    return [f"pz-{n:02d}" for n in range(AUDIENCE)]


@pytest.fixture
def running(audience, marketer, approver) -> Campaign:
    """An approved promo email campaign to ``audience``, started, its first 20 recipients fanned out (queued)."""
    campaign = submitted(marketer, segment=list_segment(audience, name="Pause audience"))
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    assert actions.start(campaign)
    fanout.fan_out(campaign.pk, batch=20, max_batches=1)
    return Campaign.objects.get(pk=campaign.pk)


def rows(campaign: Campaign, **filters):
    return Notification.objects.filter(campaign=campaign, **filters)


def batch_claims(notification_id) -> set[str]:
    """What a batch worker's claim of this one row wins: its item routed and its message built first, as a wave's."""
    items, _ = batch._split([Notification.objects.get(pk=notification_id)])
    ready, _ = batch._prepared(items)
    return batch._claim(ready, "standard", ready[0].target.provider.name)


def test_pause_un_feeds_the_rows_handed_to_the_queue_and_keeps_them_queued(running, marketer):
    assert fanout.feed(limit=8) == 8

    paused = actions.pause(running, marketer)

    assert paused.state == Campaign.State.PAUSED and paused.paused_at is not None
    assert rows(running, state=State.QUEUED).count() == 20
    assert rows(running, queued_at__isnull=False).count() == 0
    audit = CampaignAudit.objects.get(campaign=running, action=CampaignAudit.Action.PAUSE)
    assert audit.actor_name == "marketer"
    assert audit.detail == {"unfed": 8, "counts": {"queued": 20}}


def test_a_worker_hands_over_nothing_whose_task_was_in_the_queue_before_the_pause(running, marketer, smtp_sink):
    fanout.feed(limit=5)
    fed = [str(pk) for pk in rows(running, queued_at__isnull=False).values_list("pk", flat=True)]
    caller = batch.Caller()
    try:
        actions.pause(running, marketer)
        batch.deliver_batch(fed, "standard", caller)  # the tasks popped after the pause
        for pk in fed:
            dispatch.deliver(pk)
        assert rows(running, state=State.QUEUED).count() == 20
        assert Attempt.objects.filter(notification__campaign=running).count() == 0

        HUEYS["standard"].flush()  # the worker popped those tasks
        actions.resume(Campaign.objects.get(pk=running.pk), marketer)
        assert fanout.feed(limit=5) == 5
        fed_again = {str(pk) for pk in rows(running, queued_at__isnull=False).values_list("pk", flat=True)}
        batch.deliver_batch(sorted(set(fed) | fed_again), "standard", caller)  # old tasks too: only fed rows go
    finally:
        caller.close()

    assert {str(pk) for pk in rows(running, state=State.SENT).values_list("pk", flat=True)} == fed_again
    assert len(smtp_sink.messages()) == 5


def test_a_retry_or_a_release_that_feeds_a_row_during_the_pause_is_not_claimed_and_is_held(running, marketer):
    row = rows(running).order_by("pk").first()
    actions.pause(running, marketer)
    Notification.objects.filter(pk=row.pk).update(queued_at=timezone.now())  # as requeue_for_retry does

    assert not notification_actions.claim(Notification.objects.get(pk=row.pk))
    assert batch_claims(row.pk) == set()
    assert fanout.hold_paused() == 1
    assert Notification.objects.get(pk=row.pk).queued_at is None


def test_the_claim_of_a_campaign_row_checks_the_row_itself_so_postgresql_re_checks_it_after_a_racing_claim(running):
    fanout.feed(limit=1)
    row = rows(running, queued_at__isnull=False).get()
    with CaptureQueriesContext(connection) as queries:
        assert notification_actions.claim(row)

    claim = next(query["sql"] for query in queries.captured_queries if query["sql"].startswith("UPDATE"))
    # No "id IN (SELECT … FROM notifications …)": a racing claim's commit would not be re-checked against it.
    assert '"notifications_notification"."id" IN (SELECT' not in claim
    assert claim.endswith(
        """WHERE ("notifications_notification"."campaign_id" IN (SELECT U0."id" AS "pk" FROM "campaigns_campaign" U0"""
        """ WHERE NOT (U0."state" IN ('paused', 'cancelled')))"""
        f""" AND "notifications_notification"."id" = '{row.pk.hex}'::uuid"""
        """ AND "notifications_notification"."queued_at" IS NOT NULL AND ("notifications_notification"."state" || '')"""
        """ = 'queued')"""
    )


def during_a_feed_held_open(campaign: Campaign, act) -> None:
    """Run ``act`` while ``fanout.feed``'s transaction is held open after it marked ``campaign``'s queued rows fed.

    The feed holds its lock on the campaign for half a second once the rows are marked; ``act`` starts meanwhile.
    """
    marked = threading.Event()

    def feed_held_open() -> None:
        with transaction.atomic():
            fanout._lock_running(Campaign.objects.filter(pk=campaign.pk, state=Campaign.State.RUNNING))
            rows(campaign, state=State.QUEUED).update(queued_at=timezone.now())
            marked.set()
            time.sleep(0.5)
        connection.close()

    feeder = threading.Thread(target=feed_held_open)
    feeder.start()
    marked.wait(timeout=10)
    act()
    feeder.join()


@pytest.mark.django_db(transaction=True)
def test_a_pause_waits_for_a_feed_under_way_and_un_feeds_what_it_marked(running, marketer):
    during_a_feed_held_open(running, lambda: actions.pause(running, marketer))

    assert rows(running, queued_at__isnull=False).count() == 0
    assert CampaignAudit.objects.get(campaign=running, action=CampaignAudit.Action.PAUSE).detail["unfed"] == 20


def test_nothing_makes_releases_feeds_ends_or_finishes_a_paused_campaign(running, marketer):
    scheduled = rows(running).order_by("pk")[:2]
    past = timezone.now() - timedelta(minutes=1)
    Notification.objects.filter(pk__in=[n.pk for n in scheduled]).update(state=State.SCHEDULED, send_at=past)
    Campaign.objects.filter(pk=running.pk).update(end_at=timezone.now() + timedelta(hours=1))
    actions.pause(running, marketer)

    with time_machine.travel(timezone.now() + timedelta(hours=2)):
        assert fanout.fan_out(running.pk, batch=20).created == 0
        assert fanout.release_due() == 0
        assert fanout.feed() == 0
        assert fanout.end_due() == []
        assert fanout.finish_done() == []
        fanout.tick(batch=20)
        assert sweeper.sweep().due_scheduled == 0

    assert rows(running).count() == 20
    assert rows(running, state=State.SCHEDULED).count() == 2 and rows(running, state=State.QUEUED).count() == 18
    assert rows(running, queued_at__isnull=False).count() == 0
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.PAUSED


def test_a_paused_campaign_that_sent_everything_is_not_done_until_resumed(running, marketer):
    fanout.fan_out(running.pk, batch=20)
    rows(running).update(state=State.SENT, sent_at=timezone.now())
    actions.pause(running, marketer)

    assert fanout.finish_done() == []
    actions.resume(Campaign.objects.get(pk=running.pk), marketer)
    assert fanout.finish_done() == [running.pk]


def test_resume_continues_with_exactly_the_rows_not_yet_handed_over(running, marketer, approver):
    fanout.feed(limit=8)
    handed = list(rows(running, queued_at__isnull=False).order_by("pk").values_list("pk", flat=True))[:3]
    rows(running, pk__in=handed).update(state=State.SENT, sent_at=timezone.now())
    with time_machine.travel(timezone.now(), tick=False) as clock:
        actions.pause(running, marketer)
        clock.shift(90)
        resumed = actions.resume(Campaign.objects.get(pk=running.pk), approver)

    assert resumed.state == Campaign.State.RUNNING and resumed.paused_at is None
    audit = CampaignAudit.objects.get(campaign=running, action=CampaignAudit.Action.RESUME)
    assert audit.actor_name == "approver" and audit.detail == {
        "paused_seconds": 90.0,
        "spread_shifted": 0,
        "counts": {"queued": 17, "sent": 3},
    }
    fanout.tick(batch=20)  # the rest of the fan-out, then the feed
    fed = set(rows(running, state=State.QUEUED, queued_at__isnull=False).values_list("pk", flat=True))
    assert len(fed) == AUDIENCE - 3 and not fed & set(handed)


@pytest.mark.parametrize(
    ("act", "state", "message"),
    [
        (actions.pause, Campaign.State.PAUSED, "is paused: only a running campaign can be paused."),
        (actions.resume, Campaign.State.RUNNING, "is running: only a paused campaign can be resumed."),
        (actions.pause, Campaign.State.DONE, "is done: only a running campaign can be paused."),
        (actions.resume, Campaign.State.CANCELLED, "is cancelled: only a paused campaign can be resumed."),
    ],
)
def test_only_a_running_campaign_pauses_and_only_a_paused_one_resumes(running, marketer, act, state, message):
    Campaign.objects.filter(pk=running.pk).update(state=state)

    with pytest.raises(actions.CampaignRefused) as refused:
        act(running, marketer)

    assert refused.value.status == 422 and refused.value.field == "state"
    assert refused.value.message == f"campaign {running.pk} 'Weekend sale' {message}"


def test_only_its_author_or_an_approver_may_pause(running, outsider, editor):
    for user in (outsider, editor):
        with pytest.raises(actions.PermissionRefused) as refused:
            actions.pause(running, user)
        assert refused.value.status == 403
        assert refused.value.message == (
            f"{user.username} may not pause campaign {running.pk} 'Weekend sale': its author or an approver may."
        )
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.RUNNING


def test_no_worker_claims_a_row_of_a_cancelled_campaign_even_one_handed_over_again(running, marketer):
    actions.cancel(running, marketer)
    row = rows(running).order_by("pk").first()
    # What a sweeper's release of a dead worker's row, or a feed racing the cancel, leaves behind.
    Notification.objects.filter(pk=row.pk).update(state=State.QUEUED, queued_at=timezone.now())

    assert not notification_actions.claim(Notification.objects.get(pk=row.pk))
    assert batch_claims(row.pk) == set()
    assert Notification.objects.get(pk=row.pk).state == State.QUEUED


@pytest.mark.django_db(transaction=True)
def test_a_cancel_waits_for_a_feed_under_way_and_stops_what_it_marked(running, marketer, monkeypatch):
    # Only the cancel's own transaction stops rows here, as for a campaign far bigger than its first chunk.
    monkeypatch.setattr(actions, "CANCEL_CHUNK", 1)
    during_a_feed_held_open(running, lambda: actions.cancel(running, marketer))

    assert rows(running, state=State.QUEUED, queued_at__isnull=False).count() == 0
    assert rows(running, state=State.CANCELLED).count() == 20


def test_a_paused_campaign_can_be_cancelled(running, marketer):
    fanout.feed(limit=4)
    actions.pause(running, marketer)

    cancelled = actions.cancel(Campaign.objects.get(pk=running.pk), marketer)

    assert cancelled.state == Campaign.State.CANCELLED
    fanout.stop_cancelled()
    assert rows(running, state=State.CANCELLED).count() == 20


# --- the API and the page ------------------------------------------------------------------------------------------


def test_the_api_client_that_created_a_campaign_pauses_and_resumes_it(api, orders_service, running):
    Campaign.objects.filter(pk=running.pk).update(client=orders_service[0])

    paused = api.post(f"/api/v1/campaigns/{running.pk}/pause")
    again = api.post(f"/api/v1/campaigns/{running.pk}/pause")
    resumed = api.post(f"/api/v1/campaigns/{running.pk}/resume")

    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z", paused.json()["paused_at"])
    assert again.status_code == 422
    assert again.json()["fields"] == {"state": [f"campaign {running.pk} 'Weekend sale' is paused: only a running "
                                                "campaign can be paused."]}  # fmt: skip
    assert resumed.status_code == 200 and resumed.json()["state"] == "running" and resumed.json()["paused_at"] is None
    audit = CampaignAudit.objects.filter(campaign=running, action__in=("pause", "resume")).order_by("at", "pk")
    assert list(audit.values_list("action", "actor_name")) == [("pause", "api:orders"), ("resume", "api:orders")]


def test_another_clients_campaign_is_404_and_stays_running(api, running):
    assert api.post(f"/api/v1/campaigns/{running.pk}/pause").status_code == 404
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.RUNNING


def test_the_schema_lists_pause_and_resume(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    for action in ("pause", "resume"):
        operation = paths[f"/api/v1/campaigns/{{id}}/{action}"]["post"]
        assert operation["operationId"] == f"{action}_campaign"
        assert set(operation["responses"]) == {"200", "401", "404", "422"}


def test_the_page_offers_pause_then_resume_to_the_author(client, running, marketer):
    client.force_login(marketer)
    page = client.get(f"/campaigns/{running.pk}/").content.decode()
    assert 'id="pause-campaign"' in page and 'id="resume-campaign"' not in page

    assert client.post(f"/campaigns/{running.pk}/pause").status_code == 302
    page = client.get(f"/campaigns/{running.pk}/").content.decode()
    assert 'id="resume-campaign"' in page and 'id="pause-campaign"' not in page
    assert '<strong id="campaign-state" class="cp-state--paused">Paused</strong>' in page

    assert client.post(f"/campaigns/{running.pk}/resume").status_code == 302
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.RUNNING


def test_a_support_agent_sees_no_pause_button_and_gets_403(client, running, outsider):
    client.force_login(outsider)
    assert 'id="pause-campaign"' not in client.get(f"/campaigns/{running.pk}/").content.decode()
    assert client.post(f"/campaigns/{running.pk}/pause").status_code == 403
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.RUNNING
