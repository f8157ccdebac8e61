"""``tasks.enqueue_deliveries``: many deliveries in one ZADD, each a task Huey's workers read as their own."""

import pytest

from backend.notifications.queues import HUEYS
from backend.notifications.tasks import DELIVER, enqueue_deliveries

# What a task carries besides its id and argument: the enqueued ones must carry what Huey's own would.
FIELDS = ("name", "eta", "retries", "retry_delay", "retry_backoff", "priority", "kwargs", "expires", "timeout")


@pytest.mark.parametrize(("tier", "priority"), [("standard", None), ("standard", -5), ("high", None)])
def test_each_id_becomes_a_task_of_its_own_as_huey_makes_it(tier, priority):
    ids = ["6f1c2e9a-0000-4000-8000-000000000001", "6f1c2e9a-0000-4000-8000-000000000002", "third"]
    huey = HUEYS[tier]

    enqueue_deliveries(ids, tier, priority)

    popped = [huey.dequeue() for _ in ids]
    assert huey.dequeue() is None
    assert sorted(task.args for task in popped) == sorted((notification_id,) for notification_id in ids)
    assert len({task.id for task in popped}) == 3
    own = DELIVER[tier].s("x", priority=priority)
    for task in popped:
        assert {name: getattr(task, name) for name in FIELDS} == {name: getattr(own, name) for name in FIELDS}


def test_no_ids_enqueue_nothing():
    enqueue_deliveries([], "standard")
    assert HUEYS["standard"].pending_count() == 0
