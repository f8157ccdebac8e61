"""What a retention run costs on a large history (PostgreSQL), and the dashboard after new rows reuse the space.

Run with ``bin/bench retention`` (a throwaway PostgreSQL), or from the repository root against a
migrated PostgreSQL database with the demo data (it deletes rows: not a database you keep)::

    python -m backend.bench.retention [--rows 1000000]

It adds ``--rows`` notifications over the last 7 days with one attempt each and their state changes
(``dashboard_queries.fill``: 2% still queued, the rest sent or delivered), oldest first as a live
table holds them, each last changed when it was made, commits them, and runs ``retention.purge`` as
if 90 days had passed since 3.5 days ago: the older half goes, with its attempts and state changes.
Then a second run, which finds nothing left to delete: the cost of reading the table once, which
every run pays. It prints rows deleted, slices, seconds and rows per second, and PostgreSQL's CPU
time for each run (from ``/proc``).

Then what the next hours do to the dashboard: VACUUM (as autovacuum would), a tenth of ``--rows``
new notifications sent in the last hour, with their attempts and state changes, which reuse the
space the purge freed, VACUUM again; and the median of 3 dashboard refreshes of the last hour and of
the last day.
"""

import argparse
import os
import time
from datetime import timedelta


def postgres_cpu_seconds() -> float:
    """User + system CPU seconds of every ``postgres`` process on this machine, from /proc."""
    total, tick = 0, os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)
            if "postgres" not in fields[0]:
                continue
            values = fields[1].split()
            total += int(values[11]) + int(values[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / tick


# A tenth of the rows again, sent in the last hour, each with its attempt and three state changes.
_FRESH = """
INSERT INTO notifications_notification (id, idempotency_key, idempotency_scope, request_hash, recipient_id, kind_id,
    channel, priority, params, state, reason, provider, provider_ref, attempt_count, replayed_attempts, last_error,
    preview, created_at, updated_at, queued_at, sent_at)
SELECT gen_random_uuid(), 'fresh-' || g, 'bench-fresh', '', recipient_id, kind_id, channel, priority, '{}'::jsonb,
    'sent', '', provider, 'fresh-' || g, 1, 0, '', '', now() - make_interval(secs => g * 3600.0 / %(rows)s), now(),
    now() - make_interval(secs => g * 3600.0 / %(rows)s), now() - make_interval(secs => g * 3600.0 / %(rows)s - 0.2)
FROM generate_series(1, %(rows)s) g, (SELECT recipient_id, kind_id, channel, priority, provider
    FROM notifications_notification WHERE state = 'sent' LIMIT 1) AS one;
INSERT INTO notifications_attempt (notification_id, number, provider, started_at, latency_ms, result, error,
    provider_ref, sms_encoding, sms_segments, cost, currency)
SELECT id, 1, provider, created_at, 120, 'sent', '', provider_ref, '', NULL, NULL, ''
FROM notifications_notification WHERE idempotency_scope = 'bench-fresh';
INSERT INTO notifications_statechange (notification_id, from_state, to_state, reason, at)
SELECT id, f, t, '', created_at + make_interval(secs => o)
FROM notifications_notification
CROSS JOIN (VALUES ('', 'queued', 0.0), ('queued', 'sending', 0.04), ('sending', 'sent', 0.05)) AS s(f, t, o)
WHERE idempotency_scope = 'bench-fresh'
"""
TABLES = "notifications_notification, notifications_attempt, notifications_statechange"


def refresh_ms(window_name: str) -> float:
    """Median milliseconds of 3 dashboard refreshes of ``window_name``."""
    from django.utils import timezone

    from backend.notifications.aggregates import WINDOWS
    from frontend.dashboard.views import figures

    took = []
    for _ in range(3):
        started = time.perf_counter()
        figures(WINDOWS[window_name], timezone.now())
        took.append((time.perf_counter() - started) * 1000)
    return sorted(took)[1]


def run(rows: int) -> None:
    from django.db import connection, transaction
    from django.utils import timezone

    from backend.bench.dashboard_queries import fill
    from backend.notifications import retention
    from backend.notifications.models import Attempt, Notification, StateChange

    print(f"$ python -m backend.bench.retention --rows {rows}   (database: {connection.vendor})")
    with transaction.atomic():
        took = fill(rows, oldest_first=True)
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {Notification._meta.db_table} SET updated_at = created_at")
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {Notification._meta.db_table}")
    counts = (Notification.objects.count(), Attempt.objects.count(), StateChange.objects.count())
    print(f"filled {rows:,} notifications in {took:.1f} s: {counts[0]:,} rows, {counts[1]:,} attempts, "
          f"{counts[2]:,} state changes")  # fmt: skip
    now = timezone.now() + timedelta(days=90) - timedelta(days=3.5)
    for name in ("deleting the older half", "nothing left to delete"):
        cpu, started = postgres_cpu_seconds(), time.perf_counter()
        done = retention.purge(now=now, days=90, pause=0)
        wall, cpu = time.perf_counter() - started, postgres_cpu_seconds() - cpu
        rate = f", {done.deleted / wall:,.0f} rows/s" if done.deleted else ""
        print(
            f"{name:<24} {done.deleted:>9,} deleted in {done.slices:,} slices, {wall:6.1f} s{rate};"
            f" PostgreSQL CPU {cpu:.1f} s"
        )
    left = (Notification.objects.count(), Attempt.objects.count(), StateChange.objects.count())
    print(f"left: {left[0]:,} rows, {left[1]:,} attempts, {left[2]:,} state changes")
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {TABLES}")
        for statement in _FRESH.split(";"):
            cursor.execute(statement, {"rows": rows // 10})
        cursor.execute(f"VACUUM ANALYZE {TABLES}")
    print(
        f"after {rows // 10:,} new notifications sent in the last hour: dashboard refresh, last hour"
        f" {refresh_ms('hour'):,.0f} ms, last day {refresh_ms('day'):,.0f} ms (median of 3)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="notifications over the last 7 days")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    import django

    django.setup()
    run(args.rows)


if __name__ == "__main__":
    main()
