"""1,000 inbox WebSocket clients on one daphne process (DESIGN.md §8: delivery → client p95 ≤ 100 ms).

Run from the repository root with a PostgreSQL server and a Redis server (loopback)::

    DATABASE_URL=postgres://notify@127.0.0.1:5432/notify REDIS_URL=redis://127.0.0.1:6379/0 \\
        python -m backend.bench.inbox_ws [--clients 1000] [--singles 200] [--workers 4]

What it does, all on this machine:

1. creates a throwaway database on DATABASE_URL's server (dropped at the end), migrates it and
   loads the demo data plus one person per client; uses database ``--redis-db`` (default 15) of
   REDIS_URL's server, which must be empty, and empties it again at the end;
2. accepts one ``inapp`` notification per send through ``actions.accept`` (the API's action);
3. starts one daphne process (Redis channel layer) and opens one socket per person, each
   waiting for its ``hello``;
4. **single sends**: one notification at a time to a random person;
   **send to all**: one notification to every person, by ``--workers`` threads (one worker
   process's pool). Each delivery is the worker's own code, ``dispatch.deliver`` (claim, render,
   the inbox row, commit, publish on commit), run in a thread of this process.

Latency per message, milliseconds: **delivery → receive** from the start of ``dispatch.deliver``
to the client reading ``message.new``; **publish → receive** from the channel-layer send after
commit to the same read. Clocks: ``time.perf_counter`` (CLOCK_MONOTONIC, one process).
"""

import argparse
import asyncio
import io
import json
import multiprocessing
import os
import queue
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from backend.bench.harness import answers_healthz, nearest_rank

ROOT = Path(__file__).resolve().parents[2]
TARGET_P95_MS = 100.0
WARM_UP = 10


def raise_open_files(needed: int) -> None:
    """Each socket is a file descriptor in this process and in daphne (which inherits the limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            raise SystemExit(f"ulimit -n allows {hard} open files; {needed} are needed")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


@contextmanager
def throwaway_database(server_url: str):
    """A new database on ``server_url``'s PostgreSQL server, dropped (with its connections) afterwards."""
    import psycopg

    parts = urlsplit(server_url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise SystemExit("DATABASE_URL must name a PostgreSQL server (postgres://…)")
    name = f"notify_bench_{os.getpid()}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def empty_redis_db(server_url: str, db: int):
    """Database ``db`` of ``server_url``'s Redis, refused unless empty, emptied again afterwards."""
    import redis

    url = urlunsplit(urlsplit(server_url)._replace(path=f"/{db}"))
    client = redis.Redis.from_url(url)
    if client.dbsize():
        raise SystemExit(f"Redis database {db} holds keys; pick an empty one with --redis-db")
    try:
        yield url
    finally:
        client.flushdb()


def prepare(clients: int, sends: list[int]) -> tuple[list[str], dict[str, str], list[tuple[str, str]]]:
    """People, their socket tokens, and the accepted notifications (user id, notification id) in send order."""
    from django.core.management import call_command

    from backend.notifications import actions
    from backend.notifications.models import Recipient
    from inbox import tokens

    call_command("migrate", verbosity=0)
    call_command("demo_data", stdout=io.StringIO())
    users = [f"bench-{n:04d}" for n in range(clients)]
    Recipient.objects.bulk_create(Recipient(user_id=u, language=("ar", "en")[n % 2]) for n, u in enumerate(users))
    notifications = []
    for number, person in enumerate(sends):
        request = actions.SendRequest(
            idempotency_key=f"bench-{number}", user_id=users[person], kind="shipped", params={"order": str(number)},
            channel="inapp", priority=None, send_at=None,
        )  # fmt: skip
        notifications.append((users[person], str(actions.accept(request, client=None).notification.pk)))
    return users, {u: tokens.issue(u).value for u in users}, notifications


def start_daphne(env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """One daphne process on a free loopback port; its base URL once /healthz answers."""

    from backend.stubs.smtp_sink import free_port

    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115  (daphne writes to it while it runs)
    argv = [sys.executable, "-m", "daphne", "-e", f"tcp:port={port}:interface=127.0.0.1:backlog=1024"]
    daphne = subprocess.Popen(
        [*argv, "backend.asgi:application"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    if answers_healthz(daphne, url):
        return daphne, url
    daphne.kill()
    log.seek(0)
    raise SystemExit("daphne did not start:\n" + log.read().decode(errors="replace")[-3000:])


class Clients:
    """One socket per person, in a process of their own (as browsers are): a worker's threads
    in the same process would hold the GIL while a socket's frame waits to be read.

    Reports over ``pipe``: ``("ready", seconds)`` once every socket is greeted, then
    ``(user, message id, receive time)`` per ``message.new``; stops on ``"stop"``.
    """

    def __init__(self, url: str, tokens: dict[str, str], pipe):
        self.url, self.tokens, self.pipe = url, tokens, pipe
        self.tasks: list[asyncio.Task] = []

    @classmethod
    def serve(cls, url: str, tokens: dict[str, str], pipe) -> None:
        """The child process's entry point (no Django here)."""
        asyncio.run(cls(url, tokens, pipe)._serve())

    async def _serve(self) -> None:
        started, gate = time.perf_counter(), asyncio.Semaphore(100)  # handshakes at a time
        ready = [asyncio.get_running_loop().create_future() for _ in self.tokens]
        self.tasks = [asyncio.create_task(self._run(u, gate, f)) for u, f in zip(self.tokens, ready, strict=True)]
        await asyncio.gather(*ready)
        self.pipe.send(("ready", time.perf_counter() - started))
        await asyncio.get_running_loop().run_in_executor(None, self.pipe.recv)  # "stop"
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _run(self, user: str, gate: asyncio.Semaphore, ready: asyncio.Future) -> None:
        from websockets.asyncio.client import connect

        try:
            async with gate:
                socket = await connect(
                    f"ws://{urlsplit(self.url).netloc}/ws/inbox/?token={self.tokens[user]}",
                    origin=self.url,
                    open_timeout=60,
                    compression=None,
                )
                hello = json.loads(await socket.recv())
            if hello["type"] != "hello":
                raise RuntimeError(f"{user}: expected hello, got {hello}")
        except Exception as exc:
            ready.set_exception(exc)
            return
        ready.set_result(None)
        async with socket:
            async for raw in socket:
                received = time.perf_counter()
                message = json.loads(raw)
                if message["type"] == "message.new":
                    self.pipe.send((user, message["message"]["id"], received))


class Receipts:
    """The parent's side of the pipe: a thread files each receipt under its user."""

    def __init__(self, pipe):
        self.pipe = pipe
        self.by_user: dict[str, queue.Queue] = defaultdict(queue.Queue)
        self.ready_in: float = 0.0
        kind, self.ready_in = pipe.recv()
        if kind != "ready":
            raise RuntimeError(f"the clients did not come up: {kind}")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                user, _, received = self.pipe.recv()
            except (EOFError, OSError):
                return
            self.by_user[user].put(received)

    def next_for(self, user: str, timeout: float) -> float:
        return self.by_user[user].get(timeout=timeout)


def deliverer(published: dict[str, float], held: list | None = None):
    """The worker's delivery, timed: returns ``deliver(user, notification id) -> start time``.

    Each publish's time goes into ``published[user]``; with ``held``, events are kept
    there instead of published (for the burst).
    """
    from django.db import close_old_connections

    from backend.notifications.delivery import dispatch
    from inbox import events

    publish = events._publish = getattr(events, "_publish", events.publish)

    def timed_publish(user_id, event):
        if held is not None:
            held.append((user_id, event))
            return
        published[user_id] = time.perf_counter()
        publish(user_id, event)

    events.publish = timed_publish

    def deliver(user: str, notification_id: str) -> float:
        started = time.perf_counter()
        dispatch.deliver(notification_id)
        close_old_connections()
        return started

    return deliver


def single_sends(receipts: Receipts, deliver, published, sends) -> tuple[list[float], list[float]]:
    total, transport = [], []
    for user, notification_id in sends:
        started = deliver(user, notification_id)
        received = receipts.next_for(user, 10)
        total.append((received - started) * 1000)
        transport.append((received - published[user]) * 1000)
    return total[WARM_UP:], transport[WARM_UP:]


def send_to_all(receipts: Receipts, deliver, published, sends, workers: int):
    with ThreadPoolExecutor(workers) as pool:
        starts = list(pool.map(lambda send: deliver(*send), sends))
    received = [receipts.next_for(user, 30) for user, _ in sends]
    total = [(got - start) * 1000 for got, start in zip(received, starts, strict=True)]
    transport = [(got - published[user]) * 1000 for got, (user, _) in zip(received, sends, strict=True)]
    return total, transport, max(received) - min(starts)


def burst(receipts: Receipts, deliver_held, held: list, sends):
    """Deliver everything with events held back, then publish them all back to back:
    daphne's fan-out to every socket at once, apart from the workers' pace."""
    from inbox import events

    for send in sends:
        deliver_held(*send)
    published = {}
    for user_id, event in held:
        published[user_id] = time.perf_counter()
        events._publish(user_id, event)
    received = [receipts.next_for(user, 30) for user, _ in sends]
    transport = [(got - published[user]) * 1000 for got, (user, _) in zip(received, sends, strict=True)]
    return transport, max(received) - min(published.values())


def line(label: str, total: list[float], transport: list[float]) -> str:
    total, transport = sorted(total), sorted(transport)
    return (
        f"  {label:<34} delivery → receive  p50 {nearest_rank(total, 50):6.1f}  p95 {nearest_rank(total, 95):6.1f}  "
        f"max {total[-1]:6.1f} ms | publish → receive  p50 {nearest_rank(transport, 50):5.1f}  "
        f"p95 {nearest_rank(transport, 95):5.1f} ms"
    )


def measure(url, tokens, notifications, singles: int, workers: int) -> bool:
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    clients = context.Process(target=Clients.serve, args=(url, tokens, theirs), daemon=True)
    clients.start()
    try:
        receipts = Receipts(ours)
        print(f"  {len(tokens)} sockets open and greeted in {receipts.ready_in:.1f} s (clients in their own process)")
        published: dict[str, float] = {}
        deliver = deliverer(published)
        single = notifications[: WARM_UP + singles]
        everyone = notifications[len(single) : len(single) + len(tokens)]
        again = notifications[len(single) + len(tokens) :]
        total, transport = single_sends(receipts, deliver, published, single)
        print(line(f"single sends ({singles}, one at a time)", total, transport))
        ok = nearest_rank(sorted(total), 95) <= TARGET_P95_MS
        total, transport, span = send_to_all(receipts, deliver, published, everyone, workers)
        print(line(f"send to all ({len(total)}, {workers} threads)", total, transport))
        print(f"  send to all: first delivery start → last receipt {span:.2f} s ({len(total) / span:.0f} messages/s)")
        ok = ok and nearest_rank(sorted(total), 95) <= TARGET_P95_MS
        held: list = []
        transport, span = burst(receipts, deliverer({}, held), held, again)
        transport.sort()
        print(
            f"  burst: {len(transport)} events published back to back  publish → receive  "
            f"p50 {nearest_rank(transport, 50):.1f}  p95 {nearest_rank(transport, 95):.1f}  "
            f"max {transport[-1]:.1f} ms; "
            f"first publish → last receipt {span * 1000:.0f} ms"
        )
        return ok
    finally:
        ours.send("stop")
        clients.join(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--singles", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4, help="delivery threads for the send to all")
    parser.add_argument("--redis-db", type=int, default=15)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL") or not os.environ.get("REDIS_URL"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and REDIS_URL: the benchmark measures the production stack")
    raise_open_files(args.clients * 2 + 512)
    rng = random.Random(6)
    # Single sends to random people, then one to everyone, then one to everyone again for the burst.
    sends = [rng.randrange(args.clients) for _ in range(WARM_UP + args.singles)] + 2 * list(range(args.clients))
    with (
        throwaway_database(os.environ["DATABASE_URL"]) as db_url,
        empty_redis_db(os.environ["REDIS_URL"], args.redis_db) as redis_url,
    ):
        # Production keeps database connections (README: DATABASE_CONN_MAX_AGE); without it every
        # consumer handler and every delivery would open a new PostgreSQL connection. The catch-up
        # poll is off: every figure is an event's, and the burst holds events back on purpose.
        os.environ.update(
            DATABASE_URL=db_url,
            REDIS_URL=redis_url,
            LOG_LEVEL="WARNING",
            DATABASE_CONN_MAX_AGE="300",
            NOTIFY_INBOX_POLL_INTERVAL="3600",
        )
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
        import django

        django.setup()
        users, tokens, notifications = prepare(args.clients, sends)
        daphne, url = start_daphne(dict(os.environ))
        try:
            print(f"inbox WebSocket benchmark: {len(users)} clients on one daphne process ({url}), Redis channel layer")
            ok = measure(url, tokens, notifications, args.singles, args.workers)
        finally:
            daphne.terminate()
            daphne.wait(10)
    print(f"  target: delivery → receive p95 ≤ {TARGET_P95_MS:.0f} ms — {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
