from django.conf import settings
from django.core.management.base import BaseCommand
from huey.consumer_options import ConsumerConfig

from backend.notifications import tasks  # noqa: F401  (registers the tasks on each tier's Huey)
from backend.notifications.delivery.lease import Heartbeat
from backend.notifications.queues import HUEYS, TIERS


class Command(BaseCommand):
    help = "Run one tier's worker pool (a Huey consumer on that tier's queue only)."

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

    def handle(self, tier: str, workers: int | None, worker_type: str, max_poll_delay: float, **options):
        database = settings.DATABASES["default"]
        if not database.get("OPTIONS", {}).get("pool"):
            # Read when each thread connects (the connection objects share this dict).
            database["CONN_MAX_AGE"] = settings.WORKER_CONN_MAX_AGE
        config = ConsumerConfig(
            workers=workers or settings.HUEY_WORKERS[tier],
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
