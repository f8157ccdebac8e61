"""The standard tier's drain rate in batches, beside the ceiling of a bare asyncio client on the same stub (issue 11).

Run it with ``bin/bench drain --notifications 200000``: bin/bench starts a throwaway PostgreSQL and
Redis, migrates and loads the demo data; this script then

1. starts the stub providers in their own process (``manage.py provider_stub``), SMS on Twilio and
   push on FCM, with a budget far above what the machine can send (``--budget``);
2. builds the backlog: ``--notifications`` queued standard notifications, half SMS and half push,
   to ``--recipients`` people in turn (each with a phone and an FCM device), inserted set-based and
   handed over through ``tasks.enqueue_deliveries`` as the accept side does;
3. measures the ceiling: a bare asyncio (aiohttp) client sending the same calls (Twilio forms, FCM
   JSON, to the same people) to the same stub, ``--ceiling-calls`` of them while nothing else runs, with as many calls
   in flight as the workers may have and with 50, 100 and 200;
4. starts ``--processes`` × ``run_worker standard`` (``--threads`` batch threads of ``--batch`` each)
   and times the drain from the first notification sent to the last, polling the /metrics running
   total of rows sent (``metric_counters``) rather than counting the table;
5. stops the workers and measures the ceiling again the same way. The best of all these is the
   ceiling: a host whose speed drifts (another job, a slower moment) must not lend the drain a
   ceiling measured while it ran slow (one run here: 3,111 calls/s before the drain, 67 %).

It prints both rates and their ratio, the CPU each process spent per notification (the workers, the
stub, PostgreSQL, Redis; the client and the stub for the ceiling), and exits non-zero when the drain
misses 2,000 sent/s or 50 % of the ceiling. The stub answers at once unless ``--latency-ms`` says otherwise.
"""

import argparse
import asyncio
import base64
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from backend.bench.otp_latency import _get, _setup_django, _start
from backend.stubs.providers_file import stub_providers_toml

TARGET_RATE = 2000.0
TARGET_SHARE = 0.5
# Calls in flight the ceiling is measured at besides the workers' own number, its best taken: aiohttp's
# client spends more per call with more in flight (80 µs a call at 100, 104 at 200, 129–150 at 400).
CEILING_IN_FLIGHT = (50, 100, 200)


def _providers_file(stub: str, budget: float) -> str:
    path = Path(tempfile.mkdtemp()) / "providers.toml"
    unlimited = {"rate": budget, "burst": budget, "high_share": 0.2}
    routes = {"sms": ["twilio"], "push": ["fcm"]}
    path.write_text(stub_providers_toml(stub, timeout=5.0, routes=routes, twilio=unlimited, fcm=unlimited))
    return str(path)


def phone(n: int) -> str:
    """The phone of bench recipient ``n``: a valid New York number (priced as US), one per recipient."""
    return f"+1212{2_000_000 + n:07d}"


def fcm_token(n: int) -> str:
    """The FCM device token of bench recipient ``n``."""
    return f"drain-fcm-{n}"


def bench_recipients(count: int) -> list[int]:
    """The ids of ``count`` recipients ``drain-0`` … with a phone and an FCM device each (made once, set-based).

    A campaign's rows go to as many people: each batch reads as many recipients and devices as it
    has rows, and each SMS is priced for its own number, where one recipient for the whole backlog
    made every row's inputs the same.
    """
    from backend.notifications.models import Device, Recipient

    users = [Recipient(user_id=f"drain-{n}", phone=phone(n), language="en") for n in range(count)]
    Recipient.objects.bulk_create(users, batch_size=5000, ignore_conflicts=True)
    ids = dict(Recipient.objects.filter(user_id__startswith="drain-").values_list("user_id", "pk"))
    recipients = [ids[f"drain-{n}"] for n in range(count)]
    fcm = Device.Platform.FCM
    devices = (Device(recipient_id=pk, platform=fcm, token=fcm_token(n)) for n, pk in enumerate(recipients))
    Device.objects.bulk_create(devices, batch_size=5000, ignore_conflicts=True)
    return recipients


def build_backlog(
    size: int, channels: tuple[str, ...] = ("sms", "push"), chunk: int = 20000, recipients: int = 10_000
) -> None:
    """Insert ``size`` queued standard notifications (channels in turn), enqueued as the accept side does.

    Row ``g`` goes to bench recipient ``g % recipients`` (``bench_recipients``). Rows as the API
    accepts them, with their client and its idempotency scope (the client's index takes an entry at
    each change of state). Set-based: one INSERT … SELECT generate_series per chunk, then
    ``tasks.enqueue_deliveries`` of its ids per channel (one ZADD each).
    """
    from django.db import connection

    from backend.notifications.models import ApiClient, Kind, TemplateVersion
    from backend.notifications.tasks import enqueue_deliveries

    client = ApiClient.objects.filter(name="bench-drain").first() or ApiClient.issue("bench-drain")[0]
    kind = Kind.objects.get(name="shipped")
    people = bench_recipients(recipients)
    run = uuid.uuid4().hex[:8]
    made = 0
    while made < size:
        n = min(chunk, size - made)
        for index, channel in enumerate(channels):
            count = len(range(index, n, len(channels)))
            if not count:
                continue
            version = TemplateVersion.objects.get(kind=kind, language="en", channel=channel, status="approved")
            with connection.cursor() as cursor:
                cursor.execute(
                    """
                    INSERT INTO notifications_notification
                      (id, idempotency_key, idempotency_scope, request_hash, client_id, recipient_id, kind_id, channel,
                       priority, params, state, reason, template_version_id, preview, provider, provider_ref,
                       attempt_count, replayed_attempts, last_error, created_at, updated_at, queued_at)
                    SELECT gen_random_uuid(), %s || g, %s, '', %s, (%s::bigint[])[1 + g %% %s], %s, %s, 'standard',
                           jsonb_build_object('order', g::text), 'queued', '', %s, '', '', '', 0, 0, '',
                           now(), now(), now()
                    FROM generate_series(%s, %s) AS g
                    RETURNING id
                    """,
                    [
                        f"drain-{run}-{channel}-",
                        f"client:{client.pk}",
                        client.pk,
                        people,
                        len(people),
                        kind.pk,
                        channel,
                        version.pk,
                        made,
                        made + count - 1,
                    ],
                )
                ids = [str(row[0]) for row in cursor.fetchall()]
            enqueue_deliveries(ids, "standard")
        made += n


async def _ceiling(stub: str, calls: int, concurrency: int, recipients: int) -> float:
    """Calls/s of a bare aiohttp client sending Twilio and FCM calls, ``concurrency`` at a time, to the stub.

    Call ``n`` goes to bench recipient ``n % recipients``'s phone or device, as the backlog's rows do.
    """
    import aiohttp

    twilio = f"{stub}/2010-04-01/Accounts/ACstub/Messages.json"
    fcm = f"{stub}/v1/projects/demo/messages:send"
    basic = "Basic " + base64.b64encode(b"ACstub:stub").decode()
    left = iter(range(calls))

    async def sender(session: aiohttp.ClientSession) -> None:
        for n in left:
            if n % 2:
                body = {"message": {"token": fcm_token(n % recipients), "notification": {"title": "Order shipped",
                        "body": f"Your order {n} is on its way."}, "data": {"notification_id": str(n)}}}  # fmt: skip
                request = session.post(fcm, json=body, headers={"Authorization": "Bearer stub"})
            else:
                form = {"To": phone(n % recipients), "Body": f"Your order {n} has shipped.", "From": "+15005550006"}
                request = session.post(twilio, data=form, headers={"Authorization": basic})
            async with request as response:
                await response.read()
                assert response.status in (200, 201), response.status

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.monotonic()
        await asyncio.gather(*(sender(session) for _ in range(concurrency)))
        return calls / (time.monotonic() - started)


def _ceilings(
    stub: str,
    calls: int,
    levels: list[int],
    stub_pid: dict[str, list[int]],
    services: dict[str, int],
    when: str,
    recipients: int,
) -> dict[int, float]:
    """The bare client's calls/s at each number of ``levels`` calls in flight, each printed with its CPU per call."""
    ceilings = {}
    for level in levels:
        before, client = _cpu(stub_pid, services), time.process_time()
        ceilings[level] = asyncio.run(_ceiling(stub, calls, level, recipients))
        client = time.process_time() - client
        cost = _per_notification({**before, "client": 0.0}, {**_cpu(stub_pid, services), "client": client}, calls)
        _delete(f"{stub}/_stub/messages")
        print(f"ceiling {when}: a bare asyncio client, {level} calls in flight: {ceilings[level]:,.0f} calls/s")
        print(f"  CPU per call: {cost}")
    return ceilings


def _cpu_seconds(pid: int, children: bool = False) -> float:
    """CPU seconds (user + system) of process ``pid``, all threads; ``children`` adds its reaped children's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return ticks / os.sysconf("SC_CLK_TCK")


def _service_pids() -> dict[str, int]:
    """The PID of the PostgreSQL postmaster and of the Redis server the bench runs on."""
    from django.db import connection

    from backend.notifications.delivery.shared_state import redis_client

    with connection.cursor() as cursor:
        cursor.execute("SELECT setting FROM pg_settings WHERE name = 'data_directory'")
        data = cursor.fetchone()[0]
    postmaster = int(Path(data, "postmaster.pid").read_text().split()[0])
    return {"postgres": postmaster, "redis": int(redis_client().info("server")["process_id"])}


def _cpu(pids: dict[str, list[int]], services: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of each named group of processes; PostgreSQL counts its backends, live and gone."""
    usage = {name: sum(_cpu_seconds(pid) for pid in group) for name, group in pids.items()}
    postmaster = services["postgres"]
    backends = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == postmaster]
    usage["postgres"] = _cpu_seconds(postmaster, children=True) + sum(_cpu_seconds(pid) for pid in backends)
    usage["redis"] = _cpu_seconds(services["redis"])
    return usage


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError):
        return None


def _per_notification(before: dict[str, float], after: dict[str, float], count: int) -> str:
    """``name X µs`` per notification for each group, and their total."""
    spent = {name: (after[name] - before[name]) / max(count, 1) * 1e6 for name in after}
    parts = [f"{name} {value:,.0f} µs" for name, value in spent.items()]
    return ", ".join(parts) + f"; total {sum(spent.values()):,.0f} µs"


def _sent() -> int:
    """Standard notifications in the table that are sent: the final check (it scans every row: 31 ms at 200,000)."""
    from backend.notifications.models import Notification, State

    return Notification.objects.filter(state=State.SENT, priority="standard").count()


def _sent_counter() -> int:
    """The /metrics running total of standard notifications moved to sent (``metric_counters``): one ``HGETALL``.

    What the drain polls twice a second: counting the table instead took 31 ms of PostgreSQL's CPU a
    poll at 200,000 rows, about 15 µs per notification drained taken from the workers' cores.
    """
    from backend.notifications import metric_counters
    from backend.notifications.models import State

    return metric_counters.totals().get(("state", "standard", State.SENT), 0)


def _drain(total: int, timeout: float, before: int) -> tuple[int, float]:
    """Wait until ``total`` more than ``before`` are sent (or ``timeout`` s).

    Returns (sent, seconds from the first sent to the last).
    """
    deadline = time.monotonic() + timeout
    first = last = None
    sent = 0
    while time.monotonic() < deadline:
        sent = _sent_counter() - before
        now = time.monotonic()
        if sent and first is None:
            first = (now, sent)
        if first is not None and sent > first[1]:
            last = (now, sent)
        if sent >= total:
            break
        time.sleep(0.5)
    if first is None or last is None:
        return sent, 0.0
    return last[1] - first[1], last[0] - first[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notifications", type=int, default=200_000)
    parser.add_argument("--recipients", type=int, default=10_000, help="People the backlog goes to, in turn.")
    parser.add_argument("--budget", type=float, default=1_000_000.0, help="Provider budget, messages/s (high).")
    parser.add_argument("--processes", type=int, default=2, help="run_worker standard processes.")
    parser.add_argument("--threads", type=int, default=2, help="Batch threads per process.")
    parser.add_argument("--batch", type=int, default=200, help="Notifications per batch.")
    parser.add_argument("--ceiling-calls", type=int, default=20_000, help="Calls of the bare client.")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="Stub answer delay.")
    parser.add_argument("--timeout", type=float, default=1800.0, help="Seconds the drain may take at most.")
    args = parser.parse_args()
    _setup_django()

    from backend.notifications.delivery.batch import WAVE

    port = int(os.environ.get("BENCH_STUB_PORT", "8936"))
    stub = f"http://127.0.0.1:{port}"
    providers = _providers_file(stub, args.budget)
    env = {**os.environ, "NOTIFY_PROVIDERS_FILE": providers, "LOG_LEVEL": "WARNING"}
    processes = [_start(env, "manage.py", "provider_stub", "--port", str(port))]
    try:
        _wait_for_stub(stub)
        if args.latency_ms:
            _put(f"{stub}/_stub/faults", {p: {"latency_ms": args.latency_ms} for p in ("twilio", "fcm")})
        t0 = time.monotonic()
        build_backlog(args.notifications, recipients=args.recipients)
        print(
            f"backlog of {args.notifications:,} standard notifications (SMS and push) to {args.recipients:,} "
            f"recipients in {time.monotonic() - t0:.1f} s"
        )

        in_flight = args.processes * args.threads * WAVE
        services = _service_pids()
        stub_pid = {"stub": [processes[0].pid]}
        levels = sorted({in_flight, *CEILING_IN_FLIGHT})
        ceilings = _ceilings(stub, args.ceiling_calls, levels, stub_pid, services, "before the drain", args.recipients)

        baseline = _sent_counter()
        workers = ["manage.py", "run_worker", "standard", "--workers", str(args.threads), "--batch", str(args.batch)]
        started = len(processes)
        processes += [_start(env, *workers) for _ in range(args.processes)]
        groups = {**stub_pid, "workers": [process.pid for process in processes[started:]]}
        before = _cpu(groups, services)
        sent, seconds = _drain(args.notifications, args.timeout, baseline)
        after = _cpu(groups, services)
        rate = sent / seconds if seconds else 0.0
        received = len(_get(f"{stub}/_stub/messages"))
        print(
            f"drain: {_sent():,} of {args.notifications:,} sent, {rate:,.0f} sent/s "
            f"({args.processes} processes × {args.threads} threads, batches of {args.batch}); "
            f"{received:,} calls received by the stub"
        )
        print(f"  CPU per notification (start-up included): {_per_notification(before, after, _sent())}")
        _stop(processes[started:])
        _delete(f"{stub}/_stub/messages")
        after_drain = _ceilings(
            stub, args.ceiling_calls, levels, stub_pid, services, "after the drain", args.recipients
        )
        ceilings = {level: max(ceilings[level], after_drain[level]) for level in levels}
        ceiling = max(ceilings.values())
        print(f"ceiling: {ceiling:,.0f} calls/s, the best of {2 * len(levels)} (the workers: {in_flight} in flight)")
        share = rate / ceiling if ceiling else 0.0
        alike = rate / ceilings[in_flight] if ceilings[in_flight] else 0.0
        print(f"drain / ceiling: {share:.0%} (targets ≥ {TARGET_RATE:,.0f} sent/s and ≥ {TARGET_SHARE:.0%}); "
              f"{alike:.0%} of the ceiling at the workers' {in_flight} in flight")  # fmt: skip
        print(f"({os.cpu_count()} cores; load {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
        sys.exit(0 if rate >= TARGET_RATE and share >= TARGET_SHARE else 1)
    finally:
        _stop(processes)


def _stop(processes: list[subprocess.Popen]) -> None:
    """Terminate ``processes`` and wait for them (30 s each at most, then killed)."""
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


def _wait_for_stub(stub: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            _get(f"{stub}/_stub/faults")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _request(method: str, url: str, body: dict | None = None) -> None:
    import json
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30):
        pass


def _put(url: str, body: dict) -> None:
    _request("PUT", url, body)


def _delete(url: str) -> None:
    _request("DELETE", url)


if __name__ == "__main__":
    main()
