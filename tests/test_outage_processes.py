"""Outages with real processes: Redis stopped during a burst of sends, PostgreSQL unreachable.

The Redis test runs its own redis-server on a free port (the suite's shared
one stays untouched), stops it with SHUTDOWN NOSAVE while a thread keeps
POSTing to daphne, and starts it again empty a few seconds later: every
POST answers 202 or a 503 the caller can act on, and every accepted
notification is delivered once (DESIGN.md §8: Redis restarted empty loses
nothing).
"""

import shutil
import subprocess
import threading
import time

import pytest
import requests

from backend.notifications.models import Attempt, Notification, State
from backend.stubs.smtp_sink import free_port
from tests.processes import Processes, wait_until, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

OUTAGE_SECONDS = 4


class RedisServer:
    """A throwaway redis-server without persistence on its own port."""

    def __init__(self, folder):
        self.port = free_port()
        self.folder = folder
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        argv = ["redis-server", "--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]
        self.process = subprocess.Popen(
            [*argv, "--port", str(self.port), "--dir", str(self.folder)], stdout=subprocess.DEVNULL
        )
        wait_until(self._answers, 10, "redis-server to answer")

    def _answers(self) -> bool:
        return subprocess.run(["redis-cli", "-p", str(self.port), "ping"], capture_output=True).stdout == b"PONG\n"

    def shutdown(self) -> None:
        """SHUTDOWN NOSAVE: everything it held (queues, counters, idempotency keys) is gone."""
        subprocess.run(["redis-cli", "-p", str(self.port), "shutdown", "nosave"], capture_output=True)
        self.process.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    server = RedisServer(tmp_path)
    server.start()
    yield server
    if server.process.poll() is None:
        server.shutdown()


class Sender(threading.Thread):
    """POSTs sends one after another until stopped; remembers each answer and whether Redis was down."""

    def __init__(self, url: str, key: str):
        super().__init__(daemon=True)
        self.url, self.key = url, key
        self.redis_down = False
        self.stopped = threading.Event()
        self.answers: list[tuple[str, bool, requests.Response]] = []

    def run(self) -> None:
        with requests.Session() as session:
            n = 0
            while not self.stopped.is_set():
                n += 1
                kind = "otp" if n % 4 == 0 else "shipped"
                params = {"code": f"{n:06d}"} if kind == "otp" else {"order": str(n)}
                user = ("u-ar-1", "u-en-1")[n % 2]
                down = self.redis_down
                response = session.post(
                    f"{self.url}/api/v1/notifications",
                    json={"user_id": user, "kind": kind, "params": params},
                    headers={"Authorization": f"Bearer {self.key}", "Idempotency-Key": f"outage-{n}"},
                    timeout=30,
                )
                self.answers.append((kind, down and self.redis_down, response))
                time.sleep(0.03)


def test_a_redis_outage_during_a_burst_loses_nothing_and_sends_each_once(redis_server, smtp_sink, orders_service):
    env = worker_env(
        smtp_sink.port,
        REDIS_URL=redis_server.url,
        NOTIFY_VISIBILITY_TIMEOUT="1",
        NOTIFY_SWEEP_INTERVAL="0.2",
        NOTIFY_RATE_LIMITS="",
        NOTIFY_OTP_LIMIT="1000",
    )
    processes = Processes(env)
    try:
        web = processes.start_web()
        daemons = [processes.start("run_worker", tier) for tier in ("high", "standard")]
        daemons.append(processes.start("run_scheduler"))
        sender = Sender(web, orders_service[1])
        sender.start()
        time.sleep(1)
        sender.redis_down = True
        redis_server.shutdown()
        time.sleep(OUTAGE_SECONDS)
        redis_server.start()  # empty: the queued tasks are gone with it
        sender.redis_down = False
        time.sleep(1)
        sender.stopped.set()
        sender.join(timeout=30)

        for kind, _, response in sender.answers:
            assert response.status_code in (202, 503), (kind, response.status_code, response.text)
            if response.status_code == 503:
                assert kind == "otp"  # only the limit that fails closed refuses
                assert int(response.headers["Retry-After"]) > 0
                assert response.json()["error"] == "unavailable"
        during = [(kind, r.status_code) for kind, down, r in sender.answers if down]
        assert ("shipped", 202) in during and ("otp", 503) in during

        accepted = [r.json()["id"] for _, _, r in sender.answers if r.status_code == 202]
        wait_until(
            lambda: Notification.objects.filter(pk__in=accepted, state=State.SENT).count() == len(accepted),
            30,
            "every accepted notification sent",
        )
        assert all(process.poll() is None for process in daemons)  # nobody crashed or exited
    finally:
        processes.stop_all()

    shipped = Notification.objects.filter(pk__in=accepted, kind__name="shipped").count()
    assert len(smtp_sink.wait_for(shipped)) == shipped  # every mail once, none twice
    sent_attempts = Attempt.objects.filter(notification__in=accepted, result=Attempt.Result.SENT)
    assert sent_attempts.count() == len(accepted)


@pytest.fixture
def web_without_database(smtp_sink):
    """daphne whose PostgreSQL refuses connections (nothing listens on its port)."""
    processes = Processes(worker_env(smtp_sink.port, DATABASE_URL=f"postgres://notify@127.0.0.1:{free_port()}/notify"))
    yield processes.start_web()  # /healthz answers: liveness needs no database
    processes.stop_all()


def test_an_unreachable_database_is_a_503_with_retry_after_never_a_500(web_without_database):
    response = requests.post(
        f"{web_without_database}/api/v1/notifications",
        json={"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}},
        headers={"Authorization": "Bearer nk_anything", "Idempotency-Key": "order-1"},
        timeout=10,
    )
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "5"
    assert response.json() == {
        "error": "unavailable",
        "message": "The database is unavailable right now. Retry after 5 seconds; a send retried with the same "
        "Idempotency-Key is never doubled.",
    }

    page = requests.get(f"{web_without_database}/admin/", cookies={"sessionid": "x" * 32}, timeout=10)
    assert page.status_code == 503
    assert page.headers["Retry-After"] == "5"
    assert "temporarily unavailable" in page.text


def test_readiness_fails_without_the_database_while_liveness_holds(web_without_database):
    assert requests.get(f"{web_without_database}/healthz", timeout=10).status_code == 200
    ready = requests.get(f"{web_without_database}/readyz", timeout=10)
    assert ready.status_code == 503
    body = ready.json()
    assert (body["status"], body["checks"]["redis"]) == ("unavailable", "ok")
    assert body["checks"]["database"].startswith("down: ")
