"""Thin Huey tasks: they take ids and call into the delivery engine.

The same function is registered on each tier's Huey so that a high-priority
notification is only ever consumed by the high-tier workers.
"""

from django.db import close_old_connections

from backend.notifications.delivery import dispatch
from backend.notifications.delivery.shared_state import guard
from backend.notifications.queues import HUEYS


def deliver(notification_id: str) -> None:
    """Deliver one notification by id (a worker process's entry point)."""
    close_old_connections()
    try:
        dispatch.deliver(notification_id)
    finally:
        close_old_connections()


DELIVER = {tier: huey.task(name="deliver")(deliver) for tier, huey in HUEYS.items()}


def enqueue_delivery(notification_id: str, tier: str, delay: float | None = None, priority: int | None = None) -> None:
    """Put a delivery on ``tier``'s queue, after ``delay`` seconds when given.

    ``priority`` orders tasks within the queue (Huey: higher first, default 0); campaigns
    pass a negative one so transactional traffic of the same tier goes first.

    Call it from ``transaction.on_commit``: a task must never run before the
    row it names is visible to the worker. Raises ``RedisUnavailable`` when
    the queue cannot be reached; the row stays for the sweeper.
    """
    task = DELIVER[tier]
    with guard("enqueue"):
        if delay:
            task.schedule(args=(str(notification_id),), delay=delay, priority=priority)
        else:
            task(str(notification_id), priority=priority)
