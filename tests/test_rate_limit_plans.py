"""The campaign rows that count against a user's rate limits are read by recipient, whatever the statistics say.

Statistics taken before a first large campaign count almost no campaign rows; PostgreSQL then read
every campaign row through the campaign index for each batch (and, in a per-recipient lookup, for
each recipient) instead of the recipients' own rows through the (recipient, created_at) index.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications import policy
from backend.notifications.actions import accept_reads
from backend.notifications.models import Kind, Notification, Recipient
from campaigns.models import Campaign, Segment
from tests.plans_setup import analyze, copies_of, plan_of

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def stale_statistics(send) -> list[Recipient]:
    """2,000 recipients; statistics of 20,000 API rows; then a campaign of 20,000 rows nobody analyzed."""
    recipients = Recipient.objects.bulk_create(
        Recipient(user_id=f"r-{n}", email=f"r{n}@example.com", language="en") for n in range(2000)
    )
    response = send({"user_id": "r-0", "kind": "shipped", "params": {"order": "1"}})
    row = Notification.objects.get(pk=response.json()["id"])
    api_rows = copies_of(row, 20_000, "api")
    for n, copy in enumerate(api_rows):
        copy.recipient = recipients[n % 2000]
    Notification.objects.bulk_create(api_rows, batch_size=5000)
    analyze()
    segment = Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)
    campaign = Campaign.objects.create(name="First", kind=row.kind, channel="email", segment=segment)
    campaign_rows = copies_of(
        row, 20_000, "campaign", campaign_id=campaign.pk, idempotency_scope=f"campaign:{campaign.pk}"
    )
    for n, copy in enumerate(campaign_rows):
        copy.recipient = recipients[n % 2000]
    Notification.objects.bulk_create(campaign_rows, batch_size=5000)
    return recipients


def campaign_reads(captured) -> list[str]:
    return [q["sql"] for q in captured if '"notifications_notification"' in q["sql"] and "campaign_id" in q["sql"]]


def test_a_batch_reads_each_recipients_rows_by_its_index(stale_statistics):
    kind = Kind.objects.get(name="shipped")
    with CaptureQueriesContext(connection) as captured:
        facts = policy.facts_for([(kind, recipient) for recipient in stale_statistics[:500]], timezone.now())

    assert len(facts[stale_statistics[7].pk, kind.pk].campaign_events) == 10
    (read,) = campaign_reads(captured.captured_queries)
    plan = plan_of(read)
    assert "notification_recipient_idx" in plan, plan
    assert "notification_campaign_idx" not in plan and "Seq Scan on notifications_notification" not in plan, plan


def test_a_single_send_reads_its_recipients_rows_by_its_index(stale_statistics):
    now = timezone.now()
    _, _, facts, _ = accept_reads.load("shipped", "r-7", now)
    with connection.cursor() as cursor:  # the statement as the send runs it, its values bound here for EXPLAIN
        cursor.execute(f"EXPLAIN {accept_reads._statement()}", accept_reads._parameters("shipped", "r-7", now))
        plan = "\n".join(line for (line,) in cursor.fetchall())

    assert len(facts.campaign_events) == 10
    assert "notification_recipient_idx" in plan, plan
    assert "notification_campaign_idx" not in plan and "Seq Scan on notifications_notification" not in plan, plan


def test_the_orm_lookup_of_one_recipient_reads_its_rows_by_its_index(stale_statistics):
    kind = Kind.objects.get(name="shipped")
    with CaptureQueriesContext(connection) as captured:
        events = policy.campaign_events(kind, stale_statistics[7], timezone.now().timestamp() - 86400)

    assert len(events) == 10
    (read,) = campaign_reads(captured.captured_queries)
    plan = plan_of(read)
    assert "notification_recipient_idx" in plan, plan
    assert "notification_campaign_idx" not in plan, plan


def test_the_notification_table_is_analyzed_after_one_percent_of_it_changes(db):
    """Migration 0029: autovacuum's default waits for 10 % of the table, days of stale statistics on a large one."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = %s", [Notification._meta.db_table])
        (options,) = cursor.fetchone()

    assert sorted(options) == ["autovacuum_analyze_scale_factor=0.01", "autovacuum_analyze_threshold=10000"]


class _RolledBack(Exception):
    pass


@contextmanager
def _compiling_everything() -> Iterator[None]:
    """A savepoint in which every statement is worth compiling (``jit_above_cost = 0``), rolled back at the end.

    Rolled back, so that neither this nor a ``SET LOCAL`` made inside outlives it: left on, the
    test's closing foreign-key checks would each be compiled, for minutes.
    """
    with pytest.raises(_RolledBack), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit_above_cost = 0")
        yield
        raise _RolledBack


def _plan(sql: str, params) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        return cursor.fetchone()[0][0]


def test_a_batch_reads_its_campaign_events_without_compiling_them(stale_statistics):
    """Planned for a batch's recipients, the read passed ``jit_above_cost``; compiling it cost 20–33 ms a batch."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_jit_available()")
        if not cursor.fetchone()[0]:
            pytest.skip("this PostgreSQL has no JIT to turn off")
    kind = Kind.objects.get(name="shipped")
    read: list[tuple[str, list, dict]] = []

    def explained(execute, sql, params, many, context):
        if sql == policy._campaign_events_sql():
            read.append((sql, params, _plan(sql, params)))
        return execute(sql, params, many, context)

    with _compiling_everything(), connection.execute_wrapper(explained):
        policy.facts_for([(kind, recipient) for recipient in stale_statistics[:500]], timezone.now())

    ((sql, params, as_read),) = read
    assert "JIT" not in as_read
    with _compiling_everything():  # the same statement outside the read is compiled: the test can fail
        assert "JIT" in _plan(sql, params)
