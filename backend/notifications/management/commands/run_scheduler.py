import logging
import signal
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from backend.notifications.delivery.shared_state import OUTAGE_ERRORS, RedisUnavailable
from backend.notifications.delivery.sweeper import sweep

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Run the scheduler: every NOTIFY_SWEEP_INTERVAL seconds, release due scheduled notifications and "
        "re-enqueue those whose task was lost (dead worker, emptied Redis)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Sweep once and exit.")
        parser.add_argument("--interval", type=float, help="Seconds between sweeps (default NOTIFY_SWEEP_INTERVAL).")

    def handle(self, once: bool, interval: float | None, **options):
        interval = interval or settings.NOTIFY["SWEEP_INTERVAL"]
        # Stop between sweeps on SIGTERM (honcho, systemd, docker stop) with status 0.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while True:
            try:
                report = sweep()
            except (RedisUnavailable, *OUTAGE_ERRORS) as exc:
                # Redis down: the rows wait in PostgreSQL; the first sweep after it returns re-enqueues them.
                logger.warning("sweep skipped, Redis unreachable: %s", exc)
            except Exception:
                # One failed sweep (database restarting) must not stop the scheduler.
                logger.exception("sweep failed")
            else:
                if any((report.stale_sending, report.stale_queued, report.due_scheduled)) or once:
                    self.stdout.write(
                        f"sweep: {report.stale_sending} stale sending, {report.stale_queued} stale queued, "
                        f"{report.due_scheduled} scheduled released"
                    )
            if once:
                return
            time.sleep(interval)
            # A long-lived process must not hold a connection the database dropped.
            close_old_connections()
