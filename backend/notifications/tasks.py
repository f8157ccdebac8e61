"""Thin Huey tasks: they take ids and call into the delivery engine.

The same function is registered on each tier's Huey so that a high-priority
notification is only ever consumed by the high-tier workers.
"""

import struct
import time
from collections.abc import Sequence

from django.db import close_old_connections
from huey.storage import RedisPriorityQueue

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


def enqueue_deliveries(notification_ids: Sequence[str], tier: str, priority: int | None = None) -> None:
    """Put a delivery of each of ``notification_ids`` on ``tier``'s queue at once (the campaign feeder's hand-over).

    On Redis one ``ZADD`` of every task: 10,000 enqueues one by one cost 10,000 round trips
    (1.3–2.4 s of a million-row fan-out's hand-over). The members are what Huey's own
    ``RedisPriorityQueue.enqueue`` (huey 3.5) writes — an 8-byte big-endian microsecond prefix
    that keeps equal priorities in order, then the serialized task, scored ``-priority`` — so its
    workers read them as any task (``tests/test_campaign_fanout.py``). Other storages (SQLite,
    immediate mode) enqueue one by one. Same contract as ``enqueue_delivery``: call after the
    rows' commit; raises ``RedisUnavailable``.
    """
    huey, task = HUEYS[tier], DELIVER[tier]
    storage = huey.storage
    with guard("enqueue"):
        if huey.immediate or not isinstance(storage, RedisPriorityQueue):
            for notification_id in notification_ids:
                task(str(notification_id), priority=priority)
            return
        score = 0 if priority is None else -priority
        prefix = struct.pack(">Q", int(time.time() * 1e6))
        members = {
            prefix + huey.serialize_task(task.s(str(notification_id), priority=priority)): score
            for notification_id in notification_ids
        }
        if members:
            storage.conn.zadd(storage.queue_key, members)
