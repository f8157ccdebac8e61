"""Thin Huey tasks: they take ids and call into the delivery engine.

The same function is registered on each tier's Huey so that a high-priority
notification is only ever consumed by the high-tier workers. The high tier's
Huey consumer runs them one by one; the standard tier's batch workers
(``delivery/worker.py``) pop many at once (``pop_deliveries``) and deliver them
as one batch (``delivery/batch.py``). Either way a task is only a wake-up with
an id: the row's state, claimed with a conditional UPDATE, decides.
"""

import struct
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta

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


def schedule_deliveries(delays: Mapping[str, float], tier: str) -> None:
    """``enqueue_delivery`` with a delay for many ids at once: ``{notification id: seconds}``.

    On Redis one ZADD to the tier's schedule (what Huey's ``add_schedule`` writes, one member per
    task), so a batch worker re-scheduling the part of a batch the budget could not pay for costs
    one round trip; other storages schedule one by one. Raises ``RedisUnavailable``.
    """
    huey, task = HUEYS[tier], DELIVER[tier]
    storage = huey.storage
    with guard("enqueue"):
        if huey.immediate or not isinstance(storage, RedisPriorityQueue):
            for notification_id, delay in delays.items():
                task.schedule(args=(str(notification_id),), delay=delay)
            return
        now = huey._get_timestamp()
        members = {}
        for notification_id, delay in delays.items():
            eta = now + timedelta(seconds=delay)
            members[huey.serialize_task(task.s(str(notification_id), eta=eta))] = storage.convert_ts(eta)
        if members:
            storage.conn.zadd(storage.schedule_key, members)


def pop_deliveries(tier: str, count: int) -> list[str]:
    """Take up to ``count`` delivery tasks off ``tier``'s queue at once; returns their notification ids.

    On Redis one ZPOPMIN (highest Huey priority first, then oldest: the queue's own order); on
    SQLite, Huey's dequeue in a loop. A task not due yet (``enqueue_delivery`` with a delay) goes
    to the schedule instead, as Huey's consumer does. A popped task is gone from the queue: if the worker dies
    before the rows are claimed, the sweeper finds them queued with no task and enqueues them again.
    Raises ``RedisUnavailable``.
    """
    huey = HUEYS[tier]
    storage = huey.storage
    with guard("dequeue"):
        if isinstance(storage, RedisPriorityQueue):
            # Members are an 8-byte enqueue-time prefix and the task (RedisPriorityQueue.enqueue).
            messages = [member[8:] for member, _ in storage.conn.zpopmin(storage.queue_key, count)]
        else:
            messages = []
            while len(messages) < count and (message := storage.dequeue()) is not None:
                messages.append(message)
        now, ids = huey._get_timestamp(), []
        for task in map(huey.deserialize_task, messages):
            if task.eta is not None and task.eta > now:
                # Huey's schedule() puts a delayed task on the queue; its consumer would move it to the schedule.
                huey.add_schedule(task)
            else:
                ids.append(str(task.args[0]))
    return ids


def release_due(tier: str) -> int:
    """Move ``tier``'s scheduled tasks whose time came to its queue (the Huey consumer's scheduler step).

    Batch workers do not run a Huey consumer, so they call this about once a second; reading the
    schedule pops atomically, so several workers never move a task twice. Returns the tasks moved.
    Raises ``RedisUnavailable``.
    """
    huey = HUEYS[tier]
    with guard("schedule"):
        due = huey.read_schedule()
        for task in due:
            huey.enqueue(task)
    return len(due)
