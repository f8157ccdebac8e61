"""The standard tier's batch workers: threads that pop many tasks at once and deliver them as one batch.

Each thread loops: move the tier's due scheduled tasks to its queue (about once a second), pop up
to ``batch_size`` tasks (``tasks.pop_deliveries``: one ZPOPMIN), and run ``batch.deliver_batch`` on
their ids with its own libcurl multi handle and kept-alive connections (``batch.Caller``). An empty queue is
polled again after a pause that grows from 20 ms to ``max_poll_delay``. A thread never dies of an
error: Redis down, the database restarting or a bug is logged and the loop goes on; what a failed
batch left behind is recovered by leases and the sweeper (``sweeper.py``), as for a killed worker.
"""

import logging
import threading
import time

from django.db import close_old_connections

from backend.notifications.delivery import batch
from backend.notifications.delivery.shared_state import OUTAGE_ERRORS, RedisUnavailable
from backend.notifications.tasks import pop_deliveries, release_due

logger = logging.getLogger(__name__)

# Seconds between two moves of due scheduled tasks to the queue (Huey's consumer uses 1 s too).
SCHEDULE_INTERVAL = 1.0
_FIRST_POLL_DELAY = 0.02


class BatchWorker(threading.Thread):
    """One batch loop on ``tier``'s queue until ``stop`` is set (a daemon thread: it dies with its process)."""

    def __init__(self, tier: str, batch_size: int, stop: threading.Event, max_poll_delay: float, number: int = 0):
        super().__init__(name=f"batch-worker-{tier}-{number}", daemon=True)
        self.tier, self.batch_size, self.stop, self.max_poll_delay = tier, batch_size, stop, max_poll_delay
        self._next_schedule = 0.0

    def run(self) -> None:
        caller = batch.Caller()
        delay = _FIRST_POLL_DELAY
        try:
            while not self.stop.is_set():
                delay = _FIRST_POLL_DELAY if self.step(caller) else min(delay * 1.5, self.max_poll_delay)
                if delay > _FIRST_POLL_DELAY:
                    self.stop.wait(delay)
        finally:
            caller.close()

    def step(self, caller: batch.Caller) -> bool:
        """One turn of the loop; True when it delivered a batch (poll again at once)."""
        try:
            if time.monotonic() >= self._next_schedule:
                self._next_schedule = time.monotonic() + SCHEDULE_INTERVAL
                release_due(self.tier)
            ids = pop_deliveries(self.tier, self.batch_size)
            if ids:
                close_old_connections()
                batch.deliver_batch(ids, self.tier, caller)
            return bool(ids)
        except (RedisUnavailable, *OUTAGE_ERRORS) as exc:
            logger.warning("batch worker: Redis unreachable (%s)", exc)
        except Exception:
            logger.exception("batch worker: a batch failed; leases and the sweeper recover its rows")
        finally:
            close_old_connections()
        return False
