"""Time to materialize a campaign of N recipients (campaigns/fanout.py) and its first hand-over to Redis.

Run it with ``bin/bench campaign_fanout [--recipients 1000000] [--segment list|filter]``:
bin/bench starts a throwaway PostgreSQL and Redis, migrates and loads the demo data; this
script then adds N recipients set-based (a third Arabic, every 100th without an email,
every 50th opted out of promo email), a list segment of them (or a filter on an attribute
they share), and an approved promo email campaign, and prints:

- the fan-out: seconds and rows/s to make one notification per recipient, and the states made,
  with the CPU seconds PostgreSQL spent on it (every server process of the throwaway cluster,
  from ``/proc``): a figure the other jobs on a shared machine do not inflate as much as the time;
- the first feeder hand-over: seconds to put ``NOTIFY_CAMPAIGN_FEED`` tasks on the standard queue;
- Redis memory (``INFO memory``: used_memory and used_memory_peak) after both.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parents[2]


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    sys.path.insert(0, str(ROOT))
    django.setup()


def add_audience(size: int, segment_kind: str):
    """``size`` recipients ``fan-1`` … and a segment of them, set-based; returns the segment."""
    from django.db import connection

    from backend.notifications.models import Kind, Preference, Recipient
    from campaigns.models import Segment, SegmentMember

    recipient = Recipient._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {recipient} (user_id, email, phone, language, time_zone, email_bounce,"
            " phone_disabled_reason, attributes, created_at, updated_at)"
            " SELECT 'fan-' || g, CASE WHEN g %% 100 = 0 THEN '' ELSE 'fan' || g || '@example.com' END, '',"
            " CASE WHEN g %% 3 = 0 THEN 'ar' ELSE 'en' END, 'UTC', '', '', CAST(%s AS jsonb), now(), now()"
            " FROM generate_series(1, %s) g",
            ['{"bench": "fanout"}', size],
        )
        cursor.execute(
            f"INSERT INTO {Preference._meta.db_table} (recipient_id, kind_id, channel, enabled, updated_at)"
            f" SELECT id, %s, 'email', false, now() FROM {recipient}"
            " WHERE user_id LIKE 'fan-%%' AND substr(user_id, 5)::int %% 50 = 0",
            [Kind.objects.get(name="promo").pk],
        )
    if segment_kind == "filter":
        definition = {"all": [{"field": "attributes.bench", "op": "eq", "value": "fanout"}]}
        segment = Segment.objects.create(name="Bench (filter)", kind=Segment.Kind.FILTER, definition=definition)
    else:
        segment = Segment.objects.create(name="Bench (list)", kind=Segment.Kind.LIST)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {SegmentMember._meta.db_table} (segment_id, recipient_id)"
                f" SELECT %s, id FROM {recipient} WHERE user_id LIKE 'fan-%%'",
                [segment.pk],
            )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would have, long before a campaign
    return segment


def database_cpu_seconds() -> float:
    """CPU seconds (user + system) of the PostgreSQL server so far: the postmaster, its live and its ended children.

    Reads ``/proc`` (Linux, a server on this machine): the postmaster's ``cutime``/``cstime``
    hold the backends that already exited (a fan-out's worker connections close after each batch).
    """
    from django.db import connection

    def times(pid: int) -> list[int]:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return [int(value) for value in (fields[1], *fields[11:15])]  # ppid, utime, stime, cutime, cstime

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        postmaster = times(cursor.fetchone()[0])[0]
    ticks = sum(times(postmaster)[1:])
    for child in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        ticks += sum(times(int(child))[1:3])
    return ticks / os.sysconf("SC_CLK_TCK")


def approved_campaign(segment):
    """A promo email campaign to ``segment``, written by the demo marketer and approved by the demo approver."""
    from django.contrib.auth.models import User

    from backend.notifications.models import Kind
    from campaigns import actions

    marketer, approver = User.objects.get(username="marketer"), User.objects.get(username="approver")
    campaign = actions.create_draft(
        marketer, name="Bench sale", kind=Kind.objects.get(name="promo"), channel="email",
        params={"percent": "20"}, segment=segment, correction_none_reason="A benchmark.",
    ).campaign  # fmt: skip
    campaign = actions.submit(campaign, marketer)
    return actions.approve(campaign, approver, campaign.content_hash)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=200_000)
    parser.add_argument("--segment", choices=("list", "filter"), default="list")
    parser.add_argument("--batch", type=int, default=50_000, help="Recipients per fan-out transaction.")
    parser.add_argument("--parallel", type=int, default=2, help="Fan-out batches made at once (connections).")
    args = parser.parse_args()
    _setup_django()

    from django.conf import settings
    from django.db.models import Count

    from backend.notifications.models import Notification
    from backend.notifications.queues import HUEYS
    from campaigns import actions, fanout

    started = time.perf_counter()
    segment = add_audience(args.recipients, args.segment)
    campaign = approved_campaign(segment)
    print(f"$ bin/bench campaign_fanout --recipients {args.recipients} --segment {args.segment}")
    print(f"set-up (recipients, segment, submit + approve): {time.perf_counter() - started:.1f} s")
    actions.start(campaign)

    started, cpu = time.perf_counter(), database_cpu_seconds()
    report = fanout.fan_out(campaign.pk, batch=args.batch, parallel=args.parallel)
    materialize, cpu = time.perf_counter() - started, database_cpu_seconds() - cpu
    states = dict(Notification.objects.filter(campaign=campaign).values_list("state").annotate(n=Count("pk")))
    print(
        f"fan-out: {report.created:,} notifications in {report.batches} batches, {materialize:.1f} s "
        f"({report.created / materialize:,.0f} rows/s); states {states}"
    )
    print(f"PostgreSQL CPU during the fan-out: {cpu:.1f} s ({args.parallel} batches at a time)")

    started = time.perf_counter()
    fed = fanout.feed()
    handover = time.perf_counter() - started
    queue = HUEYS["standard"]
    print(
        f"first hand-over: {fed:,} tasks (NOTIFY_CAMPAIGN_FEED {settings.NOTIFY['CAMPAIGN_FEED']:,}) in "
        f"{handover:.2f} s; standard queue holds {queue.pending_count():,}"
    )
    memory = queue.storage.conn.info("memory")
    print(
        f"Redis: used_memory {memory['used_memory'] / 2**20:.1f} MiB, "
        f"used_memory_peak {memory['used_memory_peak'] / 2**20:.1f} MiB"
    )
    print(f"materialize + first hand-over: {materialize + handover:.1f} s")


if __name__ == "__main__":
    main()
