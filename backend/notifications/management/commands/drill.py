"""A failure drill against the running product on the stub providers (start it with bin/demo first)."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter

from django.core.management.base import BaseCommand, CommandError
from django.db.models import Count
from django.utils import timezone

from backend.bench.harness import interpolated
from backend.notifications import actions
from backend.notifications.models import BreakerEvent, DeadLetter, Device, Notification, Recipient, State

# The demo's stub providers post delivery receipts: an SMS may be delivered before the report.
HANDED_OVER = (State.SENT, State.DELIVERED, State.UNDELIVERED)
FINAL = {*HANDED_OVER, State.FAILED, State.SUPPRESSED, State.EXPIRED}
NEVER_ANSWERS = "stuck@never-answers.invalid"


def _stub(url: str, path: str, method: str = "GET", body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read() or b"null")


class Command(BaseCommand):
    help = (
        "Run a scripted failure drill against the running system on the stub providers: standard traffic on "
        "every channel, an OTP burst while the primary SMS provider is down, a mailbox that never answers, "
        "unregistered push tokens, and with --kill-worker one worker killed mid-batch. Prints a report."
    )

    def add_arguments(self, parser):
        parser.add_argument("--standard", type=int, default=300, help="Standard notifications (email, SMS, push).")
        parser.add_argument("--otps", type=int, default=40, help="OTPs sent while Twilio is down.")
        parser.add_argument("--outage", type=float, default=5.0, help="Seconds the primary SMS provider is down.")
        parser.add_argument("--dead-tokens", type=int, default=5, help="Users whose only push token is unregistered.")
        parser.add_argument("--stub-url", default=f"http://127.0.0.1:{os.environ.get('STUB_PORT', '8025')}")
        parser.add_argument(
            "--kill-worker", action="store_true", help="Start an extra worker and kill -9 it mid-batch."
        )
        parser.add_argument("--timeout", type=float, default=240.0, help="Seconds to wait for every final state.")

    def handle(self, *args, **opts):
        stub = opts["stub_url"].rstrip("/")
        try:
            faults = _stub(stub, "/_stub/faults")
        except (urllib.error.URLError, OSError) as exc:
            raise CommandError(f"No stub providers at {stub} ({exc}): start the product with bin/demo first.") from None
        run = timezone.now().strftime("%H%M%S")
        started = timezone.now()
        recipients = self._recipients(run, opts["standard"], opts["dead_tokens"])
        faults.setdefault("fcm", {}).setdefault("rules", {}).update(
            {f"drill-{run}-dead-{i}": "unregistered" for i in range(opts["dead_tokens"])}
        )
        _stub(stub, "/_stub/faults", "PUT", faults)

        extra = self._extra_worker() if opts["kill_worker"] else None
        results: Counter = Counter()
        ids = self._standard(run, recipients, opts["standard"], results, halfway=lambda: self._kill(extra))
        _stub(stub, "/_stub/outage", "POST", {"provider": "twilio", "seconds": opts["outage"], "error": "500"})
        ids += self._otps(run, recipients, opts["otps"], results)
        self._wait(ids, opts["timeout"])
        self._report(ids, results, started)

    def _recipients(self, run: str, standard: int, dead_tokens: int) -> list[Recipient]:
        people = []
        for i in range(max(standard // 3, dead_tokens + 1)):
            recipient = Recipient.objects.create(
                user_id=f"drill-{run}-{i}", email=f"drill-{run}-{i}@example.com", phone=f"+96650{run}{i:03d}",
                language="ar" if i % 2 else "en", time_zone="Asia/Riyadh",
            )  # fmt: skip
            token = f"drill-{run}-dead-{i}" if i < dead_tokens else f"drill-{run}-ok-{i}"
            Device.objects.create(recipient=recipient, platform=Device.Platform.FCM, token=token)
            people.append(recipient)
        stuck = Recipient.objects.create(user_id=f"drill-{run}-stuck", email=NEVER_ANSWERS, language="en")
        return [stuck, *people]

    def _accept(self, key: str, user_id: str, kind: str, params: dict, channel: str | None, results: Counter) -> str:
        request = actions.SendRequest(
            idempotency_key=key, user_id=user_id, kind=kind, params=params, channel=channel, priority=None,
            send_at=None,
        )  # fmt: skip
        accepted = actions.accept(request, client=None)
        outcome = "duplicate" if accepted.duplicate else accepted.notification.state
        results[f"{kind}: {outcome}"] += 1
        return str(accepted.notification.pk)

    def _kill(self, worker: subprocess.Popen | None) -> None:
        if worker is None:
            return
        busy = Notification.objects.filter(state=State.SENDING).count()
        worker.send_signal(signal.SIGKILL)
        worker.wait()
        self.stdout.write(f"killed worker pid {worker.pid} mid-batch ({busy} notifications were being sent)")

    def _standard(self, run: str, recipients: list[Recipient], count: int, results: Counter, halfway) -> list[str]:
        ids = [self._accept(f"drill-{run}-stuck", recipients[0].user_id, "shipped", {"order": "1"}, "email", results)]
        channels = ["email", "sms", "push"]
        people = recipients[1:]
        for i in range(count):
            if i == count // 2:
                halfway()
            person = people[i % len(people)]
            channel = channels[i % 3]
            ids.append(
                self._accept(f"drill-{run}-s{i}", person.user_id, "shipped", {"order": str(i)}, channel, results)
            )
        return ids

    def _otps(self, run: str, recipients: list[Recipient], count: int, results: Counter) -> list[str]:
        people = recipients[1:]
        return [
            self._accept(
                f"drill-{run}-otp{i}", people[i % len(people)].user_id, "otp", {"code": f"{i:06d}"}, None, results
            )
            for i in range(count)
        ]

    def _extra_worker(self) -> subprocess.Popen:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "run_worker", "standard", "--workers", "2"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        worker.stdout.readline()  # its start-up line: it is consuming from now on
        return worker

    def _wait(self, ids: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while True:
            pending = Notification.objects.filter(pk__in=ids).exclude(state__in=FINAL).count()
            if pending != last:
                self.stdout.write(f"  {len(ids) - pending}/{len(ids)} final")
                last = pending
            if pending == 0:
                return
            if time.monotonic() > deadline:
                self.stdout.write(f"{pending} not final after {timeout:.0f} s")
                return
            time.sleep(1)

    def _report(self, ids: list[str], results: Counter, started) -> None:
        rows = Notification.objects.filter(pk__in=ids)
        out = self.stdout.write
        out("\n== enqueue results")
        for key, n in sorted(results.items()):
            out(f"  {key:<28} {n}")
        out("== final states")
        for row in rows.values("kind__name", "state", "reason").annotate(n=Count("pk")).order_by("kind__name", "state"):
            out(f"  {row['kind__name']:<8} {row['state']:<11} {row['reason'] or '-':<20} {row['n']}")
        out("== attempts used")
        used = Counter(rows.values_list("attempt_count", flat=True))
        out("  " + ", ".join(f"{n}× {attempts} attempt(s)" for attempts, n in sorted(used.items())))
        out("== sent via each provider")
        for provider, n in Counter(rows.filter(state__in=HANDED_OVER).values_list("provider", flat=True)).most_common():
            out(f"  {provider:<10} {n}")
        out("== latency, accept → sent (ms)")
        handed_over = rows.filter(state__in=HANDED_OVER)
        for tier in ("high", "standard"):
            latencies = [
                (sent - created).total_seconds() * 1000
                for created, sent in handed_over.filter(priority=tier).values_list("created_at", "sent_at")
            ]
            if latencies:
                out(f"  {tier:<9} p50 {interpolated(latencies, 50):8.0f}   p95 {interpolated(latencies, 95):8.0f}"
                    f"   n={len(latencies)}")  # fmt: skip
        recovered = rows.filter(state_changes__reason="lease-expired").distinct().count()
        out(f"== recovered by the sweeper after a lost worker: {recovered}")
        letters = DeadLetter.objects.filter(notification__in=rows)
        out(f"== dead letters: {letters.count()}")
        for letter in letters:
            out(f"  {letter.pk}  {letter.notification_id}  {letter.provider}  {letter.last_error[:70]}")
        out("== circuit breaker")
        for event in BreakerEvent.objects.filter(at__gte=started).order_by("at"):
            out(f"  {event.at:%H:%M:%S} {event.provider}: {event.from_state} → {event.to_state} ({event.reason})")
