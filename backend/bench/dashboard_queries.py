"""What one Prometheus scrape of /metrics and one dashboard refresh cost on a large history (PostgreSQL).

Run with ``bin/bench dashboard_queries`` (a throwaway PostgreSQL), or from the repository root
against a migrated PostgreSQL database with the demo data::

    python -m backend.bench.dashboard_queries [--rows 1000000] [--runs 5]

It adds ``--rows`` notifications spread evenly over the last 7 days (a tenth high tier, a quarter
SMS, 2% queued, the rest sent 50–1,050 ms after acceptance, half of the SMS ``delivered``), one
attempt each (3% transient failures, SMS priced) and their three state changes, set-based inside a
transaction rolled back at the end; ANALYZE and the BRIN summaries run as autovacuum would have.
Then it times ``--runs`` scrapes (the collector's whole text) and ``--runs`` refreshes of each
dashboard window, and prints p50 and max in milliseconds.
"""

import argparse
import os
import statistics
import time

# The BRIN indexes of the dashboard's time windows (notifications migration "dashboard_time_range_brin_indexes").
INDEXES = ("notification_sent_brin", "attempt_started_brin", "statechange_at_brin")

_NOTIFICATIONS = """
INSERT INTO notifications_notification (id, idempotency_key, idempotency_scope, request_hash, recipient_id, kind_id,
    channel, priority, params, state, reason, provider, provider_ref, attempt_count, replayed_attempts, last_error,
    preview, created_at, updated_at, queued_at, sent_at)
SELECT gen_random_uuid(), 'bench-' || g, 'bench', '', %(recipient)s, %(kind)s,
    CASE WHEN g %% 4 = 0 THEN 'sms' ELSE 'email' END,
    CASE WHEN g %% 10 = 0 THEN 'high' ELSE 'standard' END, '{}'::jsonb,
    CASE WHEN g %% 50 = 0 THEN 'queued' WHEN g %% 8 = 0 THEN 'delivered' ELSE 'sent' END, '',
    CASE WHEN g %% 4 = 0 THEN 'twilio' ELSE 'smtp' END, 'ref-' || g, 1, 0, '', '',
    now() - make_interval(secs => g * 604800.0 / %(rows)s), now(),
    now() - make_interval(secs => g * 604800.0 / %(rows)s),
    CASE WHEN g %% 50 = 0 THEN NULL
         ELSE now() - make_interval(secs => g * 604800.0 / %(rows)s)
              + make_interval(secs => 0.05 + (g %% 1000) / 1000.0)
    END
FROM generate_series(1, %(rows)s) g
"""
_ATTEMPTS = """
INSERT INTO notifications_attempt (notification_id, number, provider, started_at, latency_ms, result, error,
    provider_ref, sms_encoding, sms_segments, cost, currency)
SELECT id, 1, CASE WHEN provider = '' THEN 'smtp' ELSE provider END, created_at, 120,
    CASE WHEN hashtext(id::text) %% 33 = 0 THEN 'transient' ELSE 'sent' END, '', provider_ref,
    '', NULL, CASE WHEN channel = 'sms' THEN 0.0450 END, CASE WHEN channel = 'sms' THEN 'USD' ELSE '' END
FROM notifications_notification WHERE idempotency_scope = 'bench'
"""
_HISTORY = """
INSERT INTO notifications_statechange (notification_id, from_state, to_state, reason, at)
SELECT id, f, t, '', created_at + make_interval(secs => o)
FROM notifications_notification n
CROSS JOIN (VALUES ('', 'queued', 0.0), ('queued', 'sending', 0.04), ('sending', 'sent', 0.05)) AS s(f, t, o)
WHERE n.idempotency_scope = 'bench' AND (n.state <> 'queued' OR s.t = 'queued')
"""


def fill(rows: int, oldest_first: bool = False) -> float:
    """Add the history described in the module docstring; seconds it took.

    ``oldest_first`` writes the rows in the order they were made, as a live table has them (the oldest at
    the start of the heap); else the newest first.
    """
    from django.db import connection

    from backend.notifications.models import Kind, Recipient

    started = time.perf_counter()
    params = {
        "rows": rows,
        "recipient": Recipient.objects.get(user_id="u-en-1").pk,
        "kind": Kind.objects.get(name="shipped").pk,
    }
    with connection.cursor() as cursor:
        notifications = _NOTIFICATIONS
        if oldest_first:
            notifications = notifications.replace("generate_series(1, %(rows)s)", "generate_series(%(rows)s, 1, -1)")
        for statement in (notifications, _ATTEMPTS, _HISTORY):
            cursor.execute(statement, params)
        cursor.execute("ANALYZE notifications_notification, notifications_attempt, notifications_statechange")
        # What autovacuum's autosummarize does to the BRIN indexes once their page ranges fill.
        for index in INDEXES:
            cursor.execute("SELECT brin_summarize_new_values(%s::regclass)", [index])
    return time.perf_counter() - started


def timed(call, runs: int) -> str:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        took.append((time.perf_counter() - started) * 1000)
    return f"p50 {statistics.median(took):7.0f} ms   max {max(took):7.0f} ms"


def run(rows: int, runs: int) -> None:
    """Fill, time the scrape and each window's refresh, roll everything back."""
    from django.db import connection, transaction
    from django.utils import timezone
    from prometheus_client import CollectorRegistry, generate_latest

    from backend.notifications.aggregates import WINDOWS
    from backend.notifications.metrics import NotifyCollector
    from frontend.dashboard.views import figures

    print(f"$ python -m backend.bench.dashboard_queries --rows {rows} --runs {runs}   (database: {connection.vendor})")
    with transaction.atomic():
        print(f"filled {rows:,} notifications, attempts and state changes in {fill(rows):.1f} s")
        registry = CollectorRegistry(auto_describe=False)
        registry.register(NotifyCollector())
        print(f"/metrics scrape          {timed(lambda: generate_latest(registry), runs)}")
        for name, window in WINDOWS.items():
            print(f"dashboard refresh, {name:<5} {timed(lambda w=window: figures(w, timezone.now()), runs)}")
        transaction.set_rollback(True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="notifications over the last 7 days")
    parser.add_argument("--runs", type=int, default=5, help="timed scrapes / refreshes of each window")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    import django

    django.setup()
    run(args.rows, args.runs)


if __name__ == "__main__":
    main()
