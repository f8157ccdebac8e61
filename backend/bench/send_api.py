"""Accept throughput over HTTP: the single send beside ``GET /healthz``, then the batch send (issue 11).

Run it with ``bin/bench send_api [--seconds 10] [--connections 64] [--batches 30]``: bin/bench
starts a throwaway PostgreSQL and Redis, migrates and loads the demo data; this script then adds
``--recipients`` customers (so no user's rate limit is reached), issues an API key, starts the web
tier exactly as deploy/Procfile's ``web`` line does (granian workers, ``DATABASE_POOL=1``), and
drives it with ``--connections`` keep-alive connections (plain asyncio streams: see ``_Connection``):

1. ``GET /healthz`` for ``--seconds``: the web tier's ceiling on this machine (no database);
2. ``POST /api/v1/notifications`` for ``--seconds``, each with a new key: accepted/s (202s) and
   latency p50 / p95;
3. ``--batches`` batches of ``--batch-size`` to ``POST /api/v1/notifications/batch`` over
   ``--batch-connections`` connections: notifications accepted/s, and the CPU each batch cost the
   web tier, PostgreSQL, Redis and this client (from /proc and Redis ``INFO cpu``): what the rate
   comes to on an idle machine, whatever else runs.

No worker runs: the queued notifications wait in Redis. The load generator shares the machine's
cores with the server, as a client on the same host does. Exits 1 when the single send is under
500 accepted/s or the batch under 20,000 notifications/s (the targets of issue 11).
"""

import argparse
import asyncio
import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import django

from backend.bench.harness import answers_healthz, cpu_seconds, interpolated
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


async def _drive(connections: list, seconds: float, request) -> tuple[dict[int, int], list[float], float]:
    """Run ``request(connection)`` on every connection at once for ``seconds``; (statuses, latencies ms, elapsed s)."""
    statuses: dict[int, int] = {}
    latencies: list[float] = []
    deadline = time.perf_counter() + seconds

    async def loop(connection) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            status = await request(connection)
            latencies.append((time.perf_counter() - started) * 1000)
            statuses[status] = statuses.get(status, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(loop(connection) for connection in connections))
    return statuses, latencies, time.perf_counter() - started


class _Connection:
    """One keep-alive HTTP/1.1 connection that sends ready-made requests and reads each answer's status.

    The load generator shares the 2 cores with the web tier: aiohttp spent about 0.5 ms of CPU on
    each request, an eighth of what a send costs the server; this costs about a fifth of that.
    Answers are read by their ``Content-Length`` (what Django's CommonMiddleware sets) or chunked.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> "_Connection":
        host, port = url.removeprefix("http://").split(":")
        return cls(*await asyncio.open_connection(host, int(port)))

    async def request(self, data: bytes) -> int:
        """Send ``data`` (a whole HTTP/1.1 request) and return the answer's status once its body is read."""
        self.writer.write(data)
        status = int((await self.reader.readline()).split()[1])
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        if not chunked:
            await self.reader.readexactly(length)
            return status
        while size := int((await self.reader.readline()).split(b";")[0], 16):
            await self.reader.readexactly(size + 2)
        await self.reader.readline()
        return status

    def close(self) -> None:
        self.writer.close()


def _http_request(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def _run(url: str, key: str, args, web: subprocess.Popen) -> tuple[float, float]:
    headers = {"Authorization": f"Bearer {key}"}
    serial = itertools.count()
    users = itertools.cycle(range(args.recipients))
    run = f"{time.time():.0f}"

    def body(n: int) -> dict:
        return {"user_id": f"b-{next(users)}", "kind": "shipped", "params": {"order": str(n)}}

    healthz_request = _http_request("GET", "/healthz", {})

    async def healthz(connection: _Connection) -> int:
        return await connection.request(healthz_request)

    async def single(connection: _Connection) -> int:
        n = next(serial)
        send_headers = {**headers, "Idempotency-Key": f"bench-{run}-{n}", "Content-Type": "application/json"}
        return await connection.request(
            _http_request("POST", "/api/v1/notifications", send_headers, json.dumps(body(n)).encode())
        )

    connections = [await _Connection.open(url) for _ in range(args.connections)]
    try:
        cpu = await asyncio.to_thread(_CpuMeter, web)
        statuses, _, elapsed = await _drive(connections, args.seconds, healthz)
        spent = await asyncio.to_thread(cpu.spent)
        healthz_rate = statuses.get(200, 0) / elapsed
        print(f"GET /healthz: {healthz_rate:.0f}/s  ({args.connections} connections, {elapsed:.1f} s, {statuses})")
        print(_per_request(spent, sum(statuses.values())))
        cpu = await asyncio.to_thread(_CpuMeter, web)
        statuses, latencies, elapsed = await _drive(connections, args.seconds, single)
        spent = await asyncio.to_thread(cpu.spent)
        single_rate = statuses.get(202, 0) / elapsed
        print(
            f"POST /api/v1/notifications: {single_rate:.0f} accepted/s  (p50 {interpolated(latencies, 50):.0f} ms, "
            f"p95 {interpolated(latencies, 95):.0f} ms, {elapsed:.1f} s, {statuses})"
        )
        print(_per_request(spent, sum(statuses.values())))
    finally:
        for connection in connections:
            connection.close()
    batch_rate = await _batches(url, headers, run, body, serial, args, web)
    return single_rate, batch_rate


async def _batches(url: str, headers: dict, run: str, body, serial, args, web: subprocess.Popen) -> float:
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
    # In a thread: Django refuses database calls inside the event loop.
    cpu = await asyncio.to_thread(_CpuMeter, web)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        started = time.perf_counter()
        await asyncio.gather(*(loop(session) for _ in range(args.batch_connections)))
        elapsed = time.perf_counter() - started
    spent = await asyncio.to_thread(cpu.spent)
    rate = accepted / elapsed
    print(
        f"POST /api/v1/notifications/batch: {rate:.0f} notifications/s  ({args.batches} × {args.batch_size}, "
        f"{args.batch_connections} connections, {accepted} accepted in {elapsed:.1f} s, "
        f"p50 {interpolated(latencies, 50):.0f} ms per batch, {statuses})"
    )
    print("CPU per batch: " + ", ".join(f"{name} {seconds / args.batches * 1000:.0f} ms" for name, seconds in spent))
    return rate


def _per_request(spent: list[tuple[str, float]], requests: int) -> str:
    """``CPU per request: web tier X µs, …; server side Y µs`` (all but the load generator).

    Unlike a rate, it hardly moves with the host's speed.
    """
    each = [(name, seconds / max(requests, 1) * 1e6) for name, seconds in spent]
    server = sum(micros for name, micros in each if name != "load generator")
    parts = ", ".join(f"{name} {micros:.0f} µs" for name, micros in each)
    return f"  CPU per request: {parts}; server side {server:.0f} µs"


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (granian's workers), read from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return found


class _CpuMeter:
    """CPU used from now on by the web tier, the PostgreSQL backends of this database, Redis and this client.

    The web tier is granian's process and its workers; a backend that connects meanwhile counts from 0.
    """

    def __init__(self, web: subprocess.Popen):
        self.web = [web.pid, *_children(web.pid)]
        self.before = self._read()

    def _read(self) -> dict[str, float | dict[int, float]]:
        from django.db import connection

        from backend.notifications.delivery.shared_state import redis_client

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            backends = {pid: cpu_seconds(pid) for (pid,) in cursor.fetchall()}
        redis = redis_client().info("cpu")
        return {
            "web tier": sum(cpu_seconds(pid) for pid in self.web),
            "PostgreSQL": backends,
            "Redis": redis["used_cpu_user"] + redis["used_cpu_sys"],
            "load generator": time.process_time(),
        }

    def spent(self) -> list[tuple[str, float]]:
        """``(what, CPU seconds)`` since the meter was made."""
        after = self._read()
        out = []
        for name, value in after.items():
            before = self.before[name]
            if isinstance(value, dict):
                out.append((name, sum(cpu - before.get(pid, 0.0) for pid, cpu in value.items())))  # type: ignore[union-attr]
            else:
                out.append((name, value - before))  # type: ignore[operator]
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each of the two timed phases")
    parser.add_argument("--connections", type=int, default=64, help="concurrent keep-alive connections")
    parser.add_argument("--workers", type=int, default=8, help="web worker processes (WEB_CONCURRENCY)")
    parser.add_argument("--recipients", type=int, default=50_000, help="customers the sends cycle through")
    parser.add_argument("--batches", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=1000)
    parser.add_argument("--batch-connections", type=int, default=2)
    args = parser.parse_args()
    _setup_django()
    from backend.notifications.models import ApiClient

    _customers(args.recipients)
    client, key = ApiClient.issue(f"bench-{time.time():.0f}")
    # The platform's rate is measured, not a client's own limit (NOTIFY_API_CLIENT_RATE, 5,000 a second).
    client.rate_limit = 1_000_000
    client.save(update_fields=["rate_limit"])
    process, url = _start_web(args.workers)
    try:
        single_rate, batch_rate = asyncio.run(_run(url, key, args, process))
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
