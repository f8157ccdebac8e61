"""Server time of the live SMS pricing endpoint (DESIGN.md §8: ≤ 50 ms).

Run from the repository root against a migrated database (the demo's SQLite
after ``bin/demo``, or PostgreSQL through ``DATABASE_URL``)::

    python -m backend.bench.sms_pricing [--calls 500]

Each call of ``POST /api/v1/sms/segments`` with a 1,000-character text and a
Saudi number goes through Django's whole request path in this process
(middleware, the API-key lookup in the database, DRF parsing, the analysis,
pricing, JSON rendering) by ``django.test.Client``; the time is taken around
the call, so no network and no server process are involved. It starts nothing
but Django; the API client it needs is created inside a transaction that is
rolled back at the end, so the database is left as it was.
"""

import os
import time

from backend.bench.harness import client_benchmark_main, nearest_rank

TO = "+966501234567"
TEXTS = {
    # Arabic with Latin order numbers and a product name: UCS-2, every letter listed in ucs2_characters.
    "mixed Arabic + Latin": ("طلبك رقم 5012 في الطريق إليك. Order 5012 (Nike Air) is on its way. " * 20)[:1000],
    # GSM-7 with extension characters ([ ] €), so escapes fall on part boundaries.
    "pure GSM-7": ("Order 5012 shipped [ref A-17], total 49€; track it at example.com/t/5012. " * 20)[:1000],
}
TARGET_MS = 50.0
WARM_UP = 20


def measure(client, key: str, text: str, calls: int) -> tuple[list[float], dict]:
    """Milliseconds of each of ``calls`` POSTs after a warm-up, and the last answer."""
    body = {"text": text, "to": TO}
    headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    timings = []
    for index in range(WARM_UP + calls):
        started = time.perf_counter()
        response = client.post("/api/v1/sms/segments", body, content_type="application/json", **headers)
        elapsed = (time.perf_counter() - started) * 1000
        if response.status_code != 200:
            raise SystemExit(f"unexpected answer {response.status_code}: {response.content[:300]!r}")
        if index >= WARM_UP:
            timings.append(elapsed)
    return sorted(timings), response.json()


def run(calls: int) -> bool:
    """Measure every text, print the table; True when every p99 meets the target."""
    from django.db import connection, transaction
    from django.test import Client

    from backend.notifications.models import ApiClient

    if ApiClient._meta.db_table not in connection.introspection.table_names():
        raise SystemExit("The database is not migrated: run `python manage.py migrate` first.")
    print(f"$ python -m backend.bench.sms_pricing --calls {calls}   (database: {connection.vendor})")
    print(f"POST /api/v1/sms/segments, 1,000-character text, to {TO}; {calls} calls each, in-process server time")
    print(f"{'text':<22} {'encoding':<8} {'segments':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    ok = True
    with transaction.atomic():
        _, key = ApiClient.issue(f"bench-sms-pricing-{os.getpid()}")
        client = Client()
        for name, text in TEXTS.items():
            timings, answer = measure(client, key, text, calls)
            p50, p95, p99 = (nearest_rank(timings, q) for q in (50, 95, 99))
            ok = ok and p99 <= TARGET_MS
            print(f"{name:<22} {answer['encoding']:<8} {answer['segments']:>8} {p50:>8.2f} {p95:>8.2f} {p99:>8.2f}")
        transaction.set_rollback(True)
    print(f"target: p99 ≤ {TARGET_MS:.0f} ms — {'met' if ok else 'MISSED'}")
    return ok


def main() -> None:
    client_benchmark_main(run, __doc__.splitlines()[0], default_calls=500)


if __name__ == "__main__":
    main()
