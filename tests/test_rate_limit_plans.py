"""The campaign rows that count against a user's rate limits are read by recipient, whatever the statistics say.

Statistics taken before a first large campaign count almost no campaign rows; PostgreSQL then read
every campaign row through the campaign index for each batch (and, in a per-recipient lookup, for
each recipient) instead of the recipients' own. Those are read through the campaign rows'
(recipient, created_at) index (migration 0030): through the index of all of a recipient's rows, the
read visited every API row of the window too, and a send cost more the more the recipient was sent.
"""

import re
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
from tests.plans_setup import analyze, copies_in_sql, plan_of

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def stale_statistics(send) -> list[Recipient]:
    """2,000 recipients; statistics of 20,000 API rows; then a campaign of 20,000 rows nobody analyzed."""
    recipients = Recipient.objects.bulk_create(
        Recipient(user_id=f"r-{n}", email=f"r{n}@example.com", language="en") for n in range(2000)
    )
    response = send({"user_id": "r-0", "kind": "shipped", "params": {"order": "1"}})
    row = Notification.objects.get(pk=response.json()["id"])
    keys = [recipient.pk for recipient in recipients]
    copies_in_sql(row, 20_000, "api", keys)
    analyze()
    segment = Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)
    campaign = Campaign.objects.create(name="First", kind=row.kind, channel="email", segment=segment)
    copies_in_sql(row, 20_000, "campaign", keys, campaign=campaign.pk, idempotency_scope=f"campaign:{campaign.pk}")
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
    assert "notification_campaign_rcpt_idx" in plan, plan
    assert "notification_campaign_idx" not in plan and "Seq Scan on notifications_notification" not in plan, plan


def test_a_single_send_reads_its_recipients_rows_by_its_index(stale_statistics):
    now = timezone.now()
    _, _, facts, _ = accept_reads.load("shipped", "r-7", now)
    with connection.cursor() as cursor:  # the statement as the send runs it, its values bound here for EXPLAIN
        cursor.execute(f"EXPLAIN {accept_reads._statement()}", accept_reads._parameters("shipped", "r-7", now))
        plan = "\n".join(line for (line,) in cursor.fetchall())

    assert len(facts.campaign_events) == 10
    assert "notification_campaign_rcpt_idx" in plan, plan
    assert "notification_campaign_idx" not in plan and "Seq Scan on notifications_notification" not in plan, plan


def test_the_orm_lookup_of_one_recipient_reads_its_rows_by_its_index(stale_statistics):
    kind = Kind.objects.get(name="shipped")
    with CaptureQueriesContext(connection) as captured:
        events = policy.campaign_events(kind, stale_statistics[7], timezone.now().timestamp() - 86400)

    assert len(events) == 10
    (read,) = campaign_reads(captured.captured_queries)
    plan = plan_of(read)
    assert "notification_campaign_rcpt_idx" in plan, plan
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


def _nodes(node: dict) -> Iterator[dict]:
    """``node`` of a JSON plan and every node below it (subplans included)."""
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def _rows_discarded(plan: dict) -> int:
    """Rows the plan read from the notification table and its conditions then removed, all loops.

    Those are the API rows of a read through the index of all of a recipient's rows. The rows kept
    are not counted: a plan may visit each campaign row once per kind of the category, a count that
    depends on how many kinds the database holds, not on the recipient's traffic.
    """
    removed = ("Rows Removed by Filter", "Rows Removed by Index Recheck")
    return sum(
        sum(node.get(key, 0) for key in removed) * node["Actual Loops"]
        for node in _nodes(plan["Plan"])
        if node.get("Relation Name") == Notification._meta.db_table
    )


def _indexes_read(plan: dict) -> set[str]:
    """The notification table's indexes the plan reads (a bitmap scan's index is a node of its own)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [Notification._meta.db_table])
        indexes = {name for (name,) in cursor.fetchall()}
    return {node["Index Name"] for node in _nodes(plan["Plan"]) if node.get("Index Name") in indexes}


@pytest.fixture(params=["stale", "analyzed"])
def busy_recipient(request, stale_statistics) -> Recipient:
    """``r-7``, its 10 campaign rows of the fixture, and 1,000 more API rows made today; the table analyzed or not."""
    recipient = stale_statistics[7]
    row = Notification.objects.filter(recipient=recipient, campaign__isnull=True).first()
    copies_in_sql(row, 1000, "busy")
    if request.param == "analyzed":
        analyze()
    return recipient


def test_a_batchs_read_discards_none_of_the_recipients_api_rows(busy_recipient):
    kind = Kind.objects.get(name="shipped")
    read: list[dict] = []

    def explained(execute, sql, params, many, context):
        if sql == policy._campaign_events_sql():
            read.append(_plan(sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(explained):
        facts = policy.facts_for([(kind, busy_recipient)], timezone.now())

    assert len(facts[busy_recipient.pk, kind.pk].campaign_events) == 10
    (plan,) = read
    assert _indexes_read(plan) == {"notification_campaign_rcpt_idx"}, plan
    assert _rows_discarded(plan) == 0, plan


def test_a_single_sends_read_discards_none_of_the_recipients_api_rows(busy_recipient):
    now = timezone.now()
    _, _, facts, _ = accept_reads.load("shipped", "r-7", now)
    plan = _plan(accept_reads._statement(), accept_reads._parameters("shipped", "r-7", now))

    assert len(facts.campaign_events) == 10
    assert _indexes_read(plan) == {"notification_campaign_rcpt_idx"}, plan
    assert _rows_discarded(plan) == 0, plan


# The PREPARE types of the single send's parameters (psycopg gives them when it binds them on the server).
_PARAMETER_TYPES = {
    "kind": "text", "user_id": "text", "now": "timestamptz", "categories": "text[]", "seconds": "float8[]",
    "standard": "text", "suppressed": "text", "approved": "text",
}  # fmt: skip


def test_the_single_sends_generic_plan_discards_none_of_the_recipients_api_rows(busy_recipient):
    """The send's read is prepared (``prepared.prepared_cursor``): from its sixth run PostgreSQL may keep one plan
    for every value, planned without them. That plan, forced here, reads by the campaign rows' index too."""
    names: list[str] = []

    def numbered(match: re.Match) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    sql = re.sub(r"%\((\w+)\)s", numbered, accept_reads._statement())
    values = accept_reads._parameters("shipped", "r-7", timezone.now())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE single_send_read ({', '.join(_PARAMETER_TYPES[name] for name in names)}) AS {sql}")
        arguments = ", ".join(["%s"] * len(names))
        cursor.execute(
            f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE single_send_read ({arguments})", [values[n] for n in names]
        )
        plan = cursor.fetchone()[0][0]
        cursor.execute("DEALLOCATE single_send_read")

    scans = [node for node in _nodes(plan["Plan"]) if node.get("Index Name") == "notification_campaign_rcpt_idx"]
    assert all("$" in scan["Index Cond"] for scan in scans), plan  # planned without the values: generic
    assert _indexes_read(plan) == {"notification_campaign_rcpt_idx"}, plan
    assert _rows_discarded(plan) == 0, plan
