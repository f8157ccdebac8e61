import gc
import signal
import sys
import threading

from django.conf import settings
from django.core.management.base import BaseCommand
from huey.consumer_options import ConsumerConfig

from backend.notifications import tasks  # noqa: F401  (registers the tasks on each tier's Huey)
from backend.notifications.delivery.lease import Heartbeat
from backend.notifications.delivery.worker import BatchWorker
from backend.notifications.queues import HUEYS, TIERS


class Command(BaseCommand):
    help = (
        "Run one tier's worker pool on that tier's queue only: the high tier one notification at a time "
        "(a Huey consumer), the standard tier in batches of NOTIFY_STANDARD_BATCH (delivery/batch.py)."
    )

    def add_arguments(self, parser):
        parser.add_argument("tier", choices=TIERS)
        parser.add_argument("--workers", type=int, help="Worker count (default HUEY_<TIER>_WORKERS).")
        # No "process": a child process's claims are invisible to this process's lease heartbeat.
        parser.add_argument("--worker-type", choices=["thread", "greenlet"], default="thread")
        parser.add_argument(
            "--max-poll-delay",
            type=float,
            default=0.25,
            help="Longest pause, in seconds, between two polls of an empty queue.",
        )
        parser.add_argument(
            "--batch",
            type=int,
            help="Standard tier: notifications per batch (default NOTIFY_STANDARD_BATCH; 1: one at a time).",
        )

    def handle(self, tier: str, workers: int | None, worker_type: str, max_poll_delay: float, **options):
        # What is loaded by now (Django, the apps, the tasks) lives as long as the process: frozen out of the
        # cyclic collector's reach, as in backend/web.py. Its passes walked those objects again and again:
        # 356-369 -> 305-311 us of a worker's CPU per notification in bin/bench drain.
        gc.freeze()
        database = settings.DATABASES["default"]
        if not database.get("OPTIONS", {}).get("pool"):
            # Read when each thread connects (the connection objects share this dict).
            database["CONN_MAX_AGE"] = settings.WORKER_CONN_MAX_AGE
        workers = workers or settings.HUEY_WORKERS[tier]
        # The high tier keeps batch size 1: an OTP never waits for a batch to fill or to finish.
        size = 1 if tier == "high" else options["batch"] or settings.STANDARD_BATCH
        if size > 1:
            self._run_batches(tier, workers, size, max_poll_delay)
            return
        config = ConsumerConfig(
            workers=workers,
            worker_type=worker_type,
            periodic=False,
            initial_delay=0.02,
            backoff=1.5,
            max_delay=max_poll_delay,
            check_worker_health=True,
        )
        config.validate()
        # Renews the leases of what this process's workers hold; dies with the process (kill -9 included).
        Heartbeat(tier).start()
        self.stdout.write(f"{tier} tier: {config.workers} {worker_type} workers on {HUEYS[tier].name}")
        HUEYS[tier].create_consumer(**config.values).run()

    def _run_batches(self, tier: str, workers: int, size: int, max_poll_delay: float) -> None:
        """``workers`` batch threads (delivery/worker.py) until SIGTERM or SIGINT, then let each finish its batch."""
        stop = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
        Heartbeat(tier).start()
        threads = [BatchWorker(tier, size, stop, max_poll_delay, number) for number in range(workers)]
        for thread in threads:
            thread.start()
        self.stdout.write(f"{tier} tier: {workers} batch workers of {size} on {HUEYS[tier].name}")
        while not stop.wait(1.0):
            pass
        for thread in threads:
            thread.join()
        sys.exit(0)
