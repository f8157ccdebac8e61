"""What the batch send's 20,000 notifications/s asks of this machine, whatever the web tier does (issue 11).

Run it with ``bin/bench batch_floor [--rounds 6] [--batches 5]``. It sends batches of 1,000 through
Django's WSGI handler in this process (no HTTP, no load generator), the body of ``bin/bench
send_api``'s batches, and measures the CPU each batch cost this process (the web tier's work),
the PostgreSQL backend and Redis (from /proc and Redis ``INFO cpu``).

The rounds take turns between PostgreSQL's foreign-key checks as deployed and the same batches with
them switched off for this session only (``SET session_replication_role = replica``: a measurement,
never a setting; it needs the throwaway cluster's superuser). Every notification and history row
checks its kind, recipient, client, template version and notification that way, one lookup each.

It prints the medians and the **floor**: the notifications/s the machine's cores would accept if
the web tier cost nothing, PostgreSQL's and Redis's CPU per notification being all there is to pay.
A floor under 20,000/s means the target cannot be met on this machine by any web tier.
"""

import argparse
import io
import itertools
import json
import os
import statistics
import time
from collections.abc import Callable

from backend.bench.harness import cpu_seconds
from backend.bench.send_api import _customers, _setup_django

BATCH_TARGET = 20_000
BATCH_SIZE = 1000


def _caller(key: str) -> Callable[[bytes], None]:
    """``call(body)``: POST ``body`` to the batch endpoint through the WSGI handler; raises unless it answers 200."""
    from backend.web import application

    def call(body: bytes) -> None:
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": "/api/v1/notifications/batch",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "HTTP_HOST": "127.0.0.1",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
            "CONTENT_TYPE": "application/json",
            "HTTP_AUTHORIZATION": f"Bearer {key}",
        }
        statuses: list[str] = []
        answer = b"".join(application(environ, lambda status, headers, *_: statuses.append(status)))
        if not statuses[0].startswith("200"):
            raise SystemExit(f"the batch endpoint answered {statuses[0]}: {answer[:300]!r}")

    return call


def _backend_pid() -> int:
    """This process's PostgreSQL backend, kept for the whole run (Django would close it after each request)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections, connection

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _set_checks(on: bool) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"SET session_replication_role = {'origin' if on else 'replica'}")


def _redis_cpu() -> float:
    from backend.notifications.delivery.shared_state import redis_client

    info = redis_client().info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of each mode, taken in turn")
    parser.add_argument("--batches", type=int, default=5, help="batches of 1,000 per round")
    parser.add_argument("--recipients", type=int, default=50_000, help="customers the items cycle through")
    args = parser.parse_args()
    os.environ["DATABASE_POOL"] = "0"  # one connection, whose backend is measured
    _setup_django()
    from backend.notifications.models import ApiClient

    _customers(args.recipients)
    client, key = ApiClient.issue(f"floor-{time.time():.0f}")
    # The platform's floor is measured, not a client's own limit (NOTIFY_API_CLIENT_RATE, 5,000 a second).
    client.rate_limit = 1_000_000
    client.save(update_fields=["rate_limit"])
    call = _caller(key)
    pid = _backend_pid()
    run = f"{time.time():.0f}-{os.getpid()}"
    serial = itertools.count()

    def body() -> bytes:
        items = [
            {
                "user_id": f"b-{n % args.recipients}",
                "kind": "shipped",
                "params": {"order": str(n)},
                "idempotency_key": f"floor-{run}-{n}",
            }
            for n in itertools.islice(serial, BATCH_SIZE)
        ]
        return json.dumps({"items": items}).encode()

    for _ in range(2):  # compile, plan and cache before measuring
        call(body())
    spent: dict[str, dict[str, list[float]]] = {mode: {"web": [], "pg": [], "redis": []} for mode in ("on", "off")}
    for _ in range(args.rounds):
        for mode in ("on", "off"):
            _set_checks(mode == "on")
            bodies = [body() for _ in range(args.batches)]
            web, pg, redis = time.process_time(), cpu_seconds(pid), _redis_cpu()
            for each in bodies:
                call(each)
            per_notification = 1e6 / (args.batches * BATCH_SIZE)
            spent[mode]["web"].append((time.process_time() - web) * per_notification)
            spent[mode]["pg"].append((cpu_seconds(pid) - pg) * per_notification)
            spent[mode]["redis"].append((_redis_cpu() - redis) * per_notification)
    _set_checks(True)
    cores = os.cpu_count() or 1
    print(f"{args.rounds} rounds × {args.batches} batches of {BATCH_SIZE} per mode, CPU µs per notification (medians):")
    floors = {}
    for mode, label in (("on", "foreign keys checked (as deployed)"), ("off", "foreign keys not checked")):
        web, pg, redis = (statistics.median(spent[mode][part]) for part in ("web", "pg", "redis"))
        floors[mode] = cores * 1e6 / (pg + redis)
        print(
            f"  {label}: web tier {web:.0f}, PostgreSQL {pg:.0f} (range {min(spent[mode]['pg']):.0f}–"
            f"{max(spent[mode]['pg']):.0f}), Redis {redis:.0f}; all {web + pg + redis:.0f} → "
            f"{cores * 1e6 / (web + pg + redis):,.0f}/s on {cores} cores; "
            f"floor without a web tier {floors[mode]:,.0f}/s"
        )
    verdict = "within reach" if floors["on"] >= BATCH_TARGET else "out of reach on this machine"
    print(f"target {BATCH_TARGET:,}/s: {verdict} (floor {floors['on']:,.0f}/s as deployed)")


if __name__ == "__main__":
    main()
