"""What a send's rate-limit read costs as its recipients' traffic grows (issue 11, migration 0030).

Run it with ``bin/bench rate_limit_read [--recipients 1000] [--rows 0,10,100,1000]``: bin/bench starts a
throwaway PostgreSQL and Redis, migrates and loads the demo data; this script then adds
``--recipients`` recipients, gives each 3 campaign notifications of a transactional kind made in
the last hour (rows that count against the user rate limits, ``policy._campaign_rows``), and for
each step of ``--rows`` tops every recipient up to that many API notifications made in the last
day (rows that do not count), analyzes the table, and prints:

- the batch send's read (``policy._campaign_events_of`` for all the recipients at once, as a batch
  of that many items reads them): milliseconds, median of 5;
- the single send's read (``accept_reads.load``, whose statement reads the same rows of one
  recipient with the kind, the recipient and the template versions): milliseconds, median of 50;
- the notification rows PostgreSQL visited for the batch's read (``EXPLAIN ANALYZE``: the rows its
  scans kept and those their conditions removed), and the index it read them by.

Times are wall clock in this process, PostgreSQL on the same machine: the statement's execution
and the round trip, not the Python that uses the rows.
"""

import argparse
import uuid
from datetime import timedelta
from functools import partial

from backend.bench.campaign_fanout import _setup_django
from backend.bench.harness import timed

CAMPAIGN_ROWS = 3


def _template_row():
    """One notification of the transactional kind ``shipped`` to ``rl-0``, sent through the API, to copy rows from."""
    from django.test import Client

    from backend.notifications.models import ApiClient, Notification

    _, key = ApiClient.issue(f"bench-rate-limit-{uuid.uuid4().hex[:8]}")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_HOST="127.0.0.1")
    body = {"user_id": "rl-0", "kind": "shipped", "params": {"order": "1"}}
    response = client.post(
        "/api/v1/notifications", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex
    )
    if response.status_code != 202:
        raise SystemExit(f"the template row's send answered {response.status_code}: {response.content[:300]!r}")
    return Notification.objects.get(pk=response.json()["id"])


def _copy(row, recipients: str, per_recipient: int, prefix: str, extra: dict) -> None:
    """``per_recipient`` copies of ``row`` for each recipient whose user_id is LIKE ``recipients``, set-based.

    Each copy gets a new id and idempotency key, its ``created_at`` spread over the last
    23 hours (the copy's number in minutes, modulo), and the columns of ``extra`` set.
    """
    from django.db import connection

    from backend.notifications.models import Notification, Recipient

    table, columns = Notification._meta.db_table, [f.column for f in Notification._meta.concrete_fields]
    values = {
        "id": "gen_random_uuid()",
        "recipient_id": "r.id",
        "idempotency_key": f"'{prefix}-' || r.id || '-' || g",
        "created_at": "now() - make_interval(mins => g %% 1380)",
        **{column: "%s" for column in extra},
    }
    select = ", ".join(values.get(column, f"n.{column}") for column in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {select} FROM {table} n,"
            f" {Recipient._meta.db_table} r, generate_series(1, %s) g WHERE n.id = %s AND r.user_id LIKE %s",
            [*(extra[column] for column in columns if column in extra), per_recipient, row.pk, recipients],
        )


def _visited(sql: str, params) -> tuple[int, set[str]]:
    """The notification rows ``sql`` visits (kept and removed by its conditions, all loops) and the indexes it reads.

    EXPLAIN gives a node's rows as an average per loop, rounded: exact here, where every recipient has
    as many rows as the next.
    """
    from django.db import connection

    from backend.notifications.models import Notification

    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0][0]["Plan"]
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s", [Notification._meta.db_table])
        indexes = {name for (name,) in cursor.fetchall()}
    rows, used, nodes = 0, set(), [plan]
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        if node.get("Relation Name") == Notification._meta.db_table:
            removed = node.get("Rows Removed by Filter", 0) + node.get("Rows Removed by Index Recheck", 0)
            rows += (node["Actual Rows"] + removed) * node["Actual Loops"]
        if node.get("Index Name") in indexes:
            used.add(node["Index Name"])
    return rows, used


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=1000, help="Recipients read at once, as a batch's.")
    parser.add_argument("--rows", default="0,10,100,1000", help="API rows per recipient at each step, ascending.")
    args = parser.parse_args()
    steps = sorted(int(value) for value in args.rows.split(","))
    _setup_django()

    from django.db import connection
    from django.utils import timezone

    from backend.notifications import policy
    from backend.notifications.actions import accept_reads
    from backend.notifications.models import Kind, Priority, Recipient, State
    from campaigns.models import Campaign, Segment

    Recipient.objects.bulk_create(
        Recipient(user_id=f"rl-{n}", email=f"rl{n}@example.com", language="en") for n in range(args.recipients)
    )
    row = _template_row()
    kind = Kind.objects.get(name="shipped")
    segment = Segment.objects.create(name="Bench (rate-limit read)", kind=Segment.Kind.LIST)
    campaign = Campaign.objects.create(name="Bench (rate-limit read)", kind=kind, channel="email", segment=segment)
    scope = {"campaign_id": campaign.pk, "idempotency_scope": f"campaign:{campaign.pk}", "state": State.SENT}
    _copy(row, "rl-%", CAMPAIGN_ROWS, "campaign", scope)
    recipients = set(Recipient.objects.filter(user_id__startswith="rl-").values_list("pk", flat=True))
    print(f"$ bin/bench rate_limit_read --recipients {args.recipients} --rows {','.join(map(str, steps))}")
    print(f"{args.recipients:,} recipients, {CAMPAIGN_ROWS} campaign rows each (they count against the limits)")
    print("API rows a recipient | batch read (ms) | single send read (ms) | rows visited by the batch read | index")
    made = 0
    for step in steps:
        if step > made:
            _copy(row, "rl-%", step - made, f"api{step}", {"state": State.SENT})
            made = step
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        now = timezone.now()
        batch_seconds, _ = timed(partial(policy._campaign_events_of, recipients, [kind], now), repeat=5)
        single_seconds, _ = timed(partial(accept_reads.load, "shipped", "rl-7", now), repeat=50)
        since = now - timedelta(seconds=policy.widest_window(kind))
        params = [list(recipients), [kind.category], Priority.STANDARD, since, State.SUPPRESSED]
        rows, indexes = _visited(policy._campaign_events_sql(), params)
        times = f"{batch_seconds * 1000:15.1f} | {single_seconds * 1000:21.2f}"
        print(f"{step:>20,} | {times} | {rows:30,} | {', '.join(sorted(indexes))}")


if __name__ == "__main__":
    main()
