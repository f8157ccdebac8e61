"""Accept throughput over HTTP: the single send beside ``GET /healthz``, then the batch send (issue 11).

Run it with ``bin/bench send_api [--seconds 10] [--connections 64] [--batches 30]``: bin/bench
starts a throwaway PostgreSQL and Redis, migrates and loads the demo data; this script then adds
``--recipients`` customers (so no user's rate limit is reached), issues an API key, starts the web
tier exactly as deploy/Procfile's ``web`` line does (granian workers, ``DATABASE_POOL=1``), and
drives it from an aiohttp client with ``--connections`` keep-alive connections:

1. ``GET /healthz`` for ``--seconds``: the web tier's ceiling on this machine (no database);
2. ``POST /api/v1/notifications`` for ``--seconds``, each with a new key: accepted/s (202s) and
   latency p50 / p95;
3. ``--batches`` batches of ``--batch-size`` to ``POST /api/v1/notifications/batch`` over
   ``--batch-connections`` connections: notifications accepted/s.

No worker runs: the queued notifications wait in Redis. The load generator shares the machine's
cores with the server, as a client on the same host does. Exits 1 when the single send is under
500 accepted/s or the batch under 20,000 notifications/s (the targets of issue 11).
"""

import argparse
import asyncio
import itertools
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import django

from backend.bench.harness import answers_healthz, interpolated
from backend.stubs.smtp_sink import free_port

ROOT = Path(__file__).resolve().parents[2]
SINGLE_TARGET = 500
BATCH_TARGET = 20_000


def _setup_django() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    sys.path.insert(0, str(ROOT))
    django.setup()


def _customers(count: int) -> None:
    """``count`` recipients ``b-0`` … with an email address, inserted set-based."""
    from backend.notifications.models import Recipient

    users = (Recipient(user_id=f"b-{n}", email=f"b{n}@example.com", language="en") for n in range(count))
    Recipient.objects.bulk_create(users, batch_size=5000, ignore_conflicts=True)


def _procfile_web() -> str:
    """deploy/Procfile's ``web`` command: the bench runs the web tier as production does."""
    for line in (ROOT / "deploy" / "Procfile").read_text().splitlines():
        if line.startswith("web:"):
            return line.split(":", 1)[1].strip()
    raise SystemExit("deploy/Procfile has no web line")


def _start_web(workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {
        **os.environ,
        "WEB_BIND": "127.0.0.1",
        "WEB_PORT": str(port),
        "WEB_CONCURRENCY": str(workers),
        "DATABASE_POOL": "1",
        "LOG_LEVEL": "WARNING",
    }
    command = _procfile_web()
    print(f"web tier: {command}  (WEB_CONCURRENCY={workers}, DATABASE_POOL=1)")
    process = subprocess.Popen(
        ["sh", "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    if not answers_healthz(process, url):
        process.kill()
        raise SystemExit(f"the web tier did not answer /healthz: {shlex.quote(command)}")
    return process, url


async def _drive(session, seconds: float, connections: int, request) -> tuple[dict[int, int], list[float], float]:
    """Run ``request(session)`` from ``connections`` loops for ``seconds``; (statuses, latencies in ms, elapsed s)."""
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop() -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            status = await request(session)
            latencies.append((time.perf_counter() - started) * 1000)
            statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(connections)))
    return statuses, latencies, time.perf_counter() - started


async def _run(url: str, key: str, args) -> tuple[float, float]:
    headers = {"Authorization": f"Bearer {key}"}
    serial = itertools.count()
    users = itertools.cycle(range(args.recipients))
    run = f"{time.time():.0f}"

    def body(n: int) -> dict:
        return {"user_id": f"b-{next(users)}", "kind": "shipped", "params": {"order": str(n)}}

    async def healthz(session) -> int:
        async with session.get(f"{url}/healthz") as response:
            await response.read()
            return response.status

    async def single(session) -> int:
        n = next(serial)
        key_header = {**headers, "Idempotency-Key": f"bench-{run}-{n}"}
        async with session.post(f"{url}/api/v1/notifications", json=body(n), headers=key_header) as response:
            await response.read()
            return response.status

    connector = aiohttp.TCPConnector(limit=args.connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        statuses, _, elapsed = await _drive(session, args.seconds, args.connections, healthz)
        healthz_rate = statuses.get(200, 0) / elapsed
        print(f"GET /healthz: {healthz_rate:.0f}/s  ({args.connections} connections, {elapsed:.1f} s, {statuses})")
        statuses, latencies, elapsed = await _drive(session, args.seconds, args.connections, single)
        single_rate = statuses.get(202, 0) / elapsed
        print(
            f"POST /api/v1/notifications: {single_rate:.0f} accepted/s  (p50 {interpolated(latencies, 50):.0f} ms, "
            f"p95 {interpolated(latencies, 95):.0f} ms, {elapsed:.1f} s, {statuses})"
        )
    batch_rate = await _batches(url, headers, run, body, serial, args)
    return single_rate, batch_rate


async def _batches(url: str, headers: dict, run: str, body, serial, args) -> float:
    """Send ``args.batches`` batches over ``args.batch_connections`` connections; accepted notifications/s."""
    batches = [
        {"items": [{**body(n), "idempotency_key": f"bench-{run}-{n}"} for n in itertools.islice(serial, size)]}
        for size in [args.batch_size] * args.batches
    ]
    accepted, statuses, latencies = 0, {}, []
    queue = iter(batches)

    async def loop(session) -> None:
        nonlocal accepted
        for batch in queue:
            started = time.perf_counter()
            async with session.post(f"{url}/api/v1/notifications/batch", json=batch, headers=headers) as response:
                answer = await response.json()
            latencies.append((time.perf_counter() - started) * 1000)
            statuses[response.status] = statuses.get(response.status, 0) + 1
            accepted += answer.get("accepted", 0)

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(loop(session) for _ in range(args.batch_connections)))
        elapsed = time.perf_counter() - started
    rate = accepted / elapsed
    print(
        f"POST /api/v1/notifications/batch: {rate:.0f} notifications/s  ({args.batches} × {args.batch_size}, "
        f"{args.batch_connections} connections, {accepted} accepted in {elapsed:.1f} s, "
        f"p50 {interpolated(latencies, 50):.0f} ms per batch, {statuses})"
    )
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each of the two timed phases")
    parser.add_argument("--connections", type=int, default=64, help="concurrent keep-alive connections")
    parser.add_argument("--workers", type=int, default=4, help="web worker processes (WEB_CONCURRENCY)")
    parser.add_argument("--recipients", type=int, default=50_000, help="customers the sends cycle through")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--batch-connections", type=int, default=2)
    args = parser.parse_args()
    _setup_django()
    from backend.notifications.models import ApiClient

    _customers(args.recipients)
    _, key = ApiClient.issue(f"bench-{time.time():.0f}")
    process, url = _start_web(args.workers)
    try:
        single_rate, batch_rate = asyncio.run(_run(url, key, args))
    finally:
        process.terminate()
        process.wait(timeout=30)
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average (1, 5, 15 min) after the run: {load}")
    met = single_rate >= SINGLE_TARGET and batch_rate >= BATCH_TARGET
    print(
        f"targets: single ≥ {SINGLE_TARGET} accepted/s, batch ≥ {BATCH_TARGET} notifications/s: "
        f"{'met' if met else 'NOT met'}"
    )
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
