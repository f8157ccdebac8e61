"""The OTP recovery drill: ``kill -9`` of a high-tier worker while OTPs are in flight.

It starts the stub providers (in this process), a scheduler and two
``run_worker high`` processes (the pool of a tier is several processes; see
README, "Production deployment"), sends OTPs at a steady rate with every
provider call taking ``--latency-ms``, and once ``--kill-after`` OTPs were
accepted and more calls are in flight than one process has threads (so the
victim surely holds some), kills one worker with SIGKILL; then it waits
until every OTP is final. It prints, from the stub's record of what each provider
accepted (one phone number per OTP):

- how many OTPs reached a provider, and accept → provider acceptance in
  seconds (p50, p95, max; the promise is ≤ 10 s even for the OTPs the dead
  worker held);
- duplicates at the providers (an OTP accepted more than once) against the
  calls in flight at the kill (at-least-once allows no more, DESIGN.md §8);
- the final states and how many claims the sweeper freed (lease expired).

``bin/drill --kill-high-worker`` runs it against a throwaway PostgreSQL and
Redis; tests/test_otp_recovery.py runs ``run_drill`` against the test ones.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from backend.bench.harness import interpolated
from backend.notifications import actions
from backend.notifications.models import Notification, Recipient, State
from backend.stubs.provider_server import StubServer
from backend.stubs.providers_file import stub_providers_toml

ROOT = Path(__file__).resolve().parents[4]
FINAL = {State.SENT, State.FAILED, State.SUPPRESSED, State.EXPIRED}
# DESIGN.md §8 and the reliability issue: an OTP reaches a provider within 10 s, a dead worker or not.
PROMISE_SECONDS = 10.0


@dataclass
class DrillReport:
    """What the drill measured, in seconds from each OTP's acceptance.

    ``latencies``: to the provider's (first) acceptance; ``recorded``: to ``sent`` in our database, which
    for the OTPs the dead worker held waits for their lease to expire.
    """

    otps: int
    in_flight: int = 0
    latencies: list[float] = field(default_factory=list)
    recorded: list[float] = field(default_factory=list)
    duplicates: int = 0
    states: Counter = field(default_factory=Counter)
    lease_expired: int = 0

    @property
    def reached(self) -> int:
        return len(self.latencies)

    @property
    def longest(self) -> float:
        return max(self.latencies, default=float("inf"))

    def holds(self) -> bool:
        """Every OTP reached a provider within the promise, with no more duplicates than calls in flight."""
        return self.reached == self.otps and self.longest <= PROMISE_SECONDS and self.duplicates <= self.in_flight


def _http(url: str, method: str = "GET", body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def _start(env: dict[str, str], *command: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *command], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )


def _recipients(run: str, count: int) -> list[Recipient]:
    """One person and one phone number per OTP: the per-number OTP limit stays out of the way."""
    return [
        Recipient.objects.create(user_id=f"otp-drill-{run}-{i}", phone=f"+9665{run[:4]}{i:04d}", language="en")
        for i in range(count)
    ]


def _accept(run: str, recipient: Recipient, i: int) -> Notification:
    request = actions.SendRequest(
        idempotency_key=f"otp-drill-{run}-{i}", user_id=recipient.user_id, kind="otp", params={"code": f"{i:06d}"},
        channel=None, priority=None, send_at=None,
    )  # fmt: skip
    return actions.accept(request, client=None).notification


def _wait_final(ids: list, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not Notification.objects.filter(pk__in=ids).exclude(state__in=FINAL).exists():
            return
        time.sleep(0.2)


def run_drill(
    env: dict[str, str], stub_url: str, otps: int = 100, rate: float = 20.0, latency_ms: int = 300,
    kill_after: int = 40, out: TextIO = sys.stdout,
) -> DrillReport:  # fmt: skip
    """Run the drill with worker processes started in ``env`` against the stub at ``stub_url``.

    ``env`` must point the processes at this process's database, Redis and providers file. Rate in OTPs
    per second. Returns the figures; ``out`` gets a line at the kill.
    """
    run = f"{timezone.now():%M%S}-{uuid.uuid4().hex[:6]}"
    _http(f"{stub_url}/_stub/faults", "PUT", {p: {"latency_ms": latency_ms} for p in ("twilio", "vonage")})
    people = _recipients(run, otps)
    env = {**env, "PYTHONUNBUFFERED": "1"}
    victim, survivor = _worker(env), _worker(env)
    processes = [victim, survivor, _start(env, "run_scheduler")]
    report = DrillReport(otps=otps)
    # More calls in flight than one process has threads: some of them are the victim's.
    threads = int(env.get("HUEY_HIGH_WORKERS", settings.HUEY_WORKERS["high"]))
    try:
        for worker in (victim, survivor):
            worker.stdout.readline()  # its start-up line: it consumes from now on
        sent: list[Notification] = []
        start = time.monotonic()
        for i, person in enumerate(people):
            time.sleep(max(0.0, start + i / rate - time.monotonic()))
            sent.append(_accept(run, person, i))
            if i >= kill_after and victim.returncode is None:
                in_flight = Notification.objects.filter(pk__in=[n.pk for n in sent], state=State.SENDING).count()
                if in_flight > threads or i == otps - 1:
                    report.in_flight = _kill(victim, in_flight, out)
        _wait_final([n.pk for n in sent], timeout=40)
        time.sleep(latency_ms / 1000 + 0.5)  # calls the dead worker left behind still land
        _measure(report, sent, _http(f"{stub_url}/_stub/messages"))
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            process.wait(timeout=30)
    return report


def _worker(env: dict[str, str]) -> subprocess.Popen:
    return _start(env, "run_worker", "high", "--max-poll-delay", "0.05")


def _kill(worker: subprocess.Popen, in_flight: int, out: TextIO) -> int:
    """``kill -9`` the worker; returns ``in_flight``, the calls in flight in both workers at that moment."""
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    out.write(f"killed high-tier worker pid {worker.pid} with kill -9: {in_flight} OTP calls in flight\n")
    return in_flight


def _measure(report: DrillReport, sent: list[Notification], messages: list[dict]) -> None:
    by_phone: dict[str, list[float]] = {}
    for message in messages:
        by_phone.setdefault(message["to"], []).append(message["at"])
    phones = dict(Recipient.objects.filter(pk__in=[n.recipient_id for n in sent]).values_list("pk", "phone"))
    for notification in sent:
        accepted = sorted(by_phone.get(phones[notification.recipient_id], []))
        if accepted:
            report.latencies.append(accepted[0] - notification.created_at.timestamp())
            report.duplicates += len(accepted) - 1
    rows = Notification.objects.filter(pk__in=[n.pk for n in sent])
    times = rows.filter(state=State.SENT).values_list("created_at", "sent_at")
    report.recorded = [(sent_at - created).total_seconds() for created, sent_at in times]
    report.states = Counter(rows.values_list("state", "reason"))
    report.lease_expired = rows.filter(state_changes__reason="lease-expired").distinct().count()


def print_report(report: DrillReport, out: TextIO) -> None:
    """The figures, as README's drill section quotes them."""
    out.write(f"== reached a provider: {report.reached}/{report.otps}\n")
    if report.latencies:
        out.write(
            f"== accept → provider accepted (s): p50 {interpolated(report.latencies, 50):.2f}   "
            f"p95 {interpolated(report.latencies, 95):.2f}   max {report.longest:.2f}   "
            f"(promise ≤ {PROMISE_SECONDS:g})\n"
        )
    if report.recorded:
        out.write(
            f"== accept → sent recorded (s): p50 {interpolated(report.recorded, 50):.2f}   "
            f"p95 {interpolated(report.recorded, 95):.2f}   max {max(report.recorded):.2f}\n"
        )
    out.write(
        f"== duplicates at the providers: {report.duplicates} (calls in flight at the kill: {report.in_flight})\n"
    )
    out.write(f"== claims freed by the sweeper (lease expired): {report.lease_expired}\n")
    out.write("== final states\n")
    for (state, reason), n in sorted(report.states.items()):
        out.write(f"  {state:<8} {reason or '-':<12} {n}\n")


class Command(BaseCommand):
    help = (
        "OTP recovery drill: start the stub providers, a scheduler and two high-tier workers, send OTPs, kill -9 "
        "one worker while it has calls in flight, and print accept → provider times and duplicates. Exits 1 when "
        "an OTP took longer than 10 s or never arrived, or duplicates outnumber the calls in flight."
    )

    def add_arguments(self, parser):
        parser.add_argument("--otps", type=int, default=100, help="OTPs to send (default 100).")
        parser.add_argument("--rate", type=float, default=20.0, help="OTPs accepted per second (default 20).")
        parser.add_argument("--latency-ms", type=int, default=300, help="Each provider call's duration (default 300).")
        parser.add_argument("--kill-after", type=int, default=40, help="Accepted OTPs before the kill (default 40).")
        parser.add_argument(
            "--lost-calls",
            action="store_true",
            help="The providers drop a call whose worker died before the answer: the dead worker's OTPs reach a "
            "provider only through recovery (the worst case for the 10 s promise; no duplicates).",
        )

    def handle(self, *args, otps: int, rate: float, latency_ms: int, kill_after: int, lost_calls: bool, **options):
        stub = StubServer(drop_on_hang_up=lost_calls)
        providers_file = Path(tempfile.mkdtemp()) / "providers.toml"
        providers_file.write_text(stub_providers_toml(stub.url, timeout=5.0))
        settings.NOTIFY["PROVIDERS_FILE"] = str(providers_file)
        env = {**os.environ, "NOTIFY_PROVIDERS_FILE": str(providers_file), "LOG_LEVEL": "WARNING"}
        self.stdout.write(
            f"{otps} OTPs at {rate:g}/s, each provider call {latency_ms} ms, 2 high-tier worker processes × "
            f"{settings.HUEY_WORKERS['high']} threads, lease {settings.NOTIFY['LEASE']['high']:g} s, "
            f"high-tier sweep every {settings.NOTIFY['HIGH_SWEEP_INTERVAL']:g} s"
            + (", calls cut by the kill are lost" if lost_calls else "")
        )
        started = time.monotonic()
        try:
            report = run_drill(env, stub.url, otps, rate, latency_ms, kill_after, out=self.stdout)
        finally:
            stub.stop()
        print_report(report, self.stdout)
        self.stdout.write(f"(drill took {time.monotonic() - started:.0f} s, at {timezone.now():%Y-%m-%d %H:%M} UTC)")
        if not report.holds():
            raise CommandError("the OTP promise did not hold")
