"""A single delivery reads and moves its row by primary key, whatever the statistics say of the queue.

Statistics taken while no row was queued (autovacuum re-analyzes the notification table only after 1% of it
changed) made PostgreSQL read ``id = X AND state = 'queued'`` through the tier queue's partial index, estimated
empty: every queued row of a backlog (a campaign's fan-out) was read and filtered by id, for each delivery of the
single path (the high tier's OTPs, retries): 22 ms (read) and 51 ms (claim) behind 300,000 queued rows, 0.04 ms by key.
The lease heartbeat's renewal had the same trap with the leases' index (``state = 'sending'``).
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backend.notifications.delivery import dispatch, lease
from backend.notifications.models import Notification, State
from backend.notifications.queues import HUEYS
from tests.plans_setup import analyze, copies_in_sql, plan_of


# Committed and flushed after, as test_delivery_batches' plan test: ANALYZE's row count survives a rollback.
@pytest.mark.django_db(transaction=True)
def test_a_single_delivery_reads_and_moves_its_row_by_key_whatever_the_statistics_say(demo_data, send, smtp_sink):
    response = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}})
    assert response.status_code == 202, response.json()
    row = Notification.objects.get(pk=response.json()["id"])
    Notification.objects.filter(pk=row.pk).update(state=State.SENT)
    copies_in_sql(row, 20_000)  # the history, sent
    analyze()  # no row queued: as autovacuum left them before the backlog
    Notification.objects.filter(pk=row.pk).update(state=State.QUEUED, idempotency_key="backlog")
    copies_in_sql(row, 100_000)  # a backlog, not analyzed (keys backlog-0 …)

    with CaptureQueriesContext(connection) as captured:
        dispatch.deliver(str(row.pk))

    assert Notification.objects.get(pk=row.pk).state == State.SENT
    assert len(smtp_sink.messages()) == 1
    by_key = f'"notifications_notification"."id" = \'{row.pk.hex}\''
    statements = [
        q["sql"] for q in captured.captured_queries if q["sql"].startswith(("SELECT", "UPDATE")) and by_key in q["sql"]
    ]
    assert len(statements) >= 4  # the read, the claim, the attempt count, the move to sent
    for sql in statements:
        plan = plan_of(sql)
        assert "notification_tier_queue_idx" not in plan and "notification_lease_idx" not in plan, plan
        assert "notifications_notification_pkey" in plan, plan
    HUEYS["standard"].flush()
    HUEYS["high"].flush()


@pytest.mark.django_db(transaction=True)
def test_a_lease_renewal_reads_its_rows_by_key_whatever_the_statistics_say(demo_data, send):
    """Statistics taken while nothing was in flight; then 5,000 rows sending: the beat reads the 200 it holds by key."""
    response = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}})
    row = Notification.objects.get(pk=response.json()["id"])
    Notification.objects.filter(pk=row.pk).update(state=State.SENT)
    copies_in_sql(row, 20_000)  # the history, sent
    analyze()  # nothing sending
    Notification.objects.filter(pk=row.pk).update(state=State.SENDING, idempotency_key="in-flight")
    copies_in_sql(row, 5_000)  # in flight, not analyzed
    held = [str(pk) for pk in Notification.objects.filter(state=State.SENDING).values_list("pk", flat=True)[:200]]

    with lease.held_many(held, "standard"), CaptureQueriesContext(connection) as captured:
        assert lease.renew() == 200

    [renewal] = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("UPDATE")]
    plan = plan_of(renewal)
    assert "notification_lease_idx" not in plan and "Sort" not in plan, plan
    assert "notifications_notification_pkey" in plan, plan
