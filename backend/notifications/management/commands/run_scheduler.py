import logging
import signal
import sys
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from backend.notifications import retention
from backend.notifications.delivery.shared_state import OUTAGE_ERRORS, RedisUnavailable
from backend.notifications.delivery.sweeper import sweep
from backend.notifications.queues import TIERS
from campaigns import fanout

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Run the scheduler: sweep the high tier every NOTIFY_HIGH_SWEEP_INTERVAL seconds and the standard tier "
        "every NOTIFY_SWEEP_INTERVAL seconds, releasing due scheduled notifications, claims whose lease expired "
        "(a dead worker) and re-enqueueing those whose task was lost (emptied Redis); start, fan out and feed "
        "campaigns whose time came (campaigns/fanout.py); every NOTIFY_RETENTION_INTERVAL seconds, delete "
        "notifications that ended more than NOTIFY_RETENTION_DAYS ago (retention.py)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Sweep every tier once and exit.")
        parser.add_argument(
            "--interval", type=float, help="Seconds between standard-tier sweeps (default NOTIFY_SWEEP_INTERVAL)."
        )
        parser.add_argument(
            "--high-interval",
            type=float,
            help="Seconds between high-tier sweeps (default NOTIFY_HIGH_SWEEP_INTERVAL).",
        )

    def handle(self, once: bool, interval: float | None, high_interval: float | None, **options):
        intervals = {
            "high": high_interval or settings.NOTIFY["HIGH_SWEEP_INTERVAL"],
            "standard": interval or settings.NOTIFY["SWEEP_INTERVAL"],
        }
        due = dict.fromkeys(TIERS, 0.0)
        # Stop between sweeps on SIGTERM (honcho, systemd, docker stop) with status 0.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        # Campaigns (start, fan-out, feed, done) in a thread of their own: a long fan-out never delays a sweep.
        if once:
            fanout.tick()
        else:
            threading.Thread(target=fanout.run_forever, name="campaigns", daemon=True).start()
            threading.Thread(target=retention.run_forever, name="retention", daemon=True).start()
        while True:
            started = time.monotonic()
            tiers = [tier for tier in TIERS if due[tier] <= started]
            for tier in tiers:
                due[tier] = started + intervals[tier]
            self._sweep(tiers, verbose=once)
            if once:
                return
            time.sleep(max(0.0, min(due.values()) - time.monotonic()))
            # A long-lived process must not hold a connection the database dropped.
            close_old_connections()

    def _sweep(self, tiers: list[str], verbose: bool) -> None:
        try:
            report = sweep(tiers=tiers)
        except (RedisUnavailable, *OUTAGE_ERRORS) as exc:
            # Redis down: the rows wait in PostgreSQL; the first sweep after it returns re-enqueues them.
            logger.warning("sweep skipped, Redis unreachable: %s", exc)
            return
        except Exception:
            # One failed sweep (database restarting) must not stop the scheduler.
            logger.exception("sweep failed")
            return
        if any((report.stale_sending, report.stale_queued, report.due_scheduled)) or verbose:
            self.stdout.write(
                f"sweep: {report.stale_sending} stale sending, {report.stale_queued} stale queued, "
                f"{report.due_scheduled} scheduled released"
            )
