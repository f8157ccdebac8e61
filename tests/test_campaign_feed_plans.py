"""The feeder picks a running campaign's unfed rows by the campaign index, whatever the statistics say.

Statistics taken before any campaign count no queued row; PostgreSQL then read the pick
(``campaign_id = X AND state = 'queued' AND queued_at IS NULL``) through the tier-queue index, whose
``queued_at IS NULL`` entries are every campaign's unfed rows, a paused campaign's first: each tick
walked all of those to reach the running campaign's (111 ms behind 1,000,000 of them, 1 ms now).
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications.models import Notification, Recipient, State
from backend.notifications.queues import HUEYS
from campaigns import actions, fanout, row_moves
from campaigns.models import Campaign
from tests.campaigns_setup import approved_and_started, list_segment
from tests.plans_setup import analyze, copies_in_sql, plan_of


# Committed and flushed after, as test_delivery_batches' plan test: ANALYZE's row count survives a rollback.
@pytest.mark.django_db(transaction=True)
def test_the_feed_picks_a_campaigns_rows_by_the_campaign_index_whatever_the_statistics_say(
    demo_data, send, marketer, approver
):
    response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}})
    row = Notification.objects.get(pk=response.json()["id"])
    Notification.objects.filter(pk=row.pk).update(state=State.SENT)
    copies_in_sql(row, 20_000, "api", state=State.SENT)
    analyze()  # no campaign yet, no row queued: as autovacuum left them before the first campaigns
    Recipient.objects.bulk_create(Recipient(user_id=f"fp-{n}", email=f"fp{n}@example.com") for n in range(20))
    segment = list_segment([f"fp-{n}" for n in range(20)], name="Feed plans")
    first, second = (approved_and_started(marketer, approver, segment=segment) for _ in range(2))
    for campaign in (first, second):
        assert fanout.fan_out(campaign.pk).created == 20
    actions.pause(Campaign.objects.get(pk=first.pk), marketer)
    copies_in_sql(Notification.objects.filter(campaign=first).first(), 300_000)  # its unfed rows, not analyzed
    HUEYS["standard"].flush()

    with CaptureQueriesContext(connection) as captured:
        assert fanout.feed() == 20

    (pick,) = [
        q["sql"] for q in captured.captured_queries
        if q["sql"].startswith("SELECT") and '"notifications_notification"."queued_at" IS NULL' in q["sql"]
    ]  # fmt: skip
    plan = plan_of(pick)
    assert "notification_campaign_idx" in plan, plan
    assert "notification_tier_queue_idx" not in plan, plan
    HUEYS["standard"].flush()


def campaign_after_history(send, marketer, approver) -> Campaign:
    """A running campaign of 100,020 queued rows after 100,001 sent ones, as a table fills: half of it, at its end.

    Statistics fresh: what goes wrong here is PostgreSQL costing a scan under LIMIT as if the campaign's rows were
    spread evenly through the table.
    """
    response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}})
    row = Notification.objects.get(pk=response.json()["id"])
    Notification.objects.filter(pk=row.pk).update(state=State.SENT)
    copies_in_sql(row, 100_000)  # the history before the campaign, at the start of the table
    Recipient.objects.bulk_create(Recipient(user_id=f"ch-{n}", email=f"ch{n}@example.com") for n in range(20))
    campaign = approved_and_started(marketer, approver, segment=list_segment([f"ch-{n}" for n in range(20)]))
    assert fanout.fan_out(campaign.pk).created == 20
    copies_in_sql(Notification.objects.filter(campaign=campaign).first(), 100_000)
    analyze()
    return campaign


@pytest.mark.django_db(transaction=True)
def test_the_done_check_probes_the_campaign_index_when_the_campaign_is_much_of_the_table(
    demo_data, send, marketer, approver
):
    """Fresh statistics: a sequential scan under LIMIT 1 read every row before the campaign's, at each tick."""
    campaign_after_history(send, marketer, approver)

    with CaptureQueriesContext(connection) as captured:
        assert fanout.finish_done() == []

    (probe,) = [q["sql"] for q in captured.captured_queries if "LIMIT 1" in q["sql"] and "campaign_id" in q["sql"]]
    plan = plan_of(probe)
    assert "notification_campaign_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
    HUEYS["standard"].flush()


@pytest.mark.django_db(transaction=True)
def test_a_chunk_of_a_cancel_reads_the_campaign_index_when_its_rows_lie_after_the_history(
    demo_data, send, marketer, approver
):
    """Under LIMIT, a sequential scan was costed as if the campaign's rows were spread evenly: each chunk read the
    whole history before them (row_moves.stop_unsent, behind a cancel, an end time and a pause)."""
    campaign = campaign_after_history(send, marketer, approver)

    with CaptureQueriesContext(connection) as captured:
        moved = row_moves.stop_unsent(campaign.pk, State.CANCELLED, "campaign-cancelled", timezone.now(), limit=1000)

    assert moved == 1000
    moves = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("WITH moved")]
    assert len(moves) == 2  # from scheduled (none), then from queued
    for move in moves:
        plan = plan_of(move)
        assert "notification_campaign_idx" in plan, plan
        assert "Seq Scan" not in plan, plan
    HUEYS["standard"].flush()
