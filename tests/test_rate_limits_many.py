"""rate_limits.hit_many: one Redis call for a batch, the same verdicts as ``hit`` called event by event."""

import pytest

from backend.notifications import rate_limits
from backend.notifications.delivery.shared_state import redis_client
from backend.notifications.rate_limits import Window

NOW = 1_800_000_000.0
HOUR, DAY = Window("rate:1:t:h", 3600, 5), Window("rate:1:t:d", 86400, 4)
OTHER = Window("rate:2:t:h", 3600, 1)


@pytest.mark.parametrize(
    "count",
    [
        lambda events: rate_limits.hit_many(events, NOW),
        lambda events: [rate_limits.hit(windows, NOW) for windows in events],
    ],
    ids=["hit_many", "hit one by one"],
)
def test_a_batch_of_events_gets_the_verdicts_of_single_hits_in_a_row(count):
    rate_limits.hit([DAY], NOW - 7200)  # earlier today: the day has 3 left, the hour 5
    events = [[HOUR, DAY], [HOUR, DAY], [OTHER], [HOUR, DAY], [], [HOUR, DAY], [OTHER], [HOUR]]

    verdicts = count(events)

    assert [(v.allowed, v.refused_by, v.reopens_at) for v in verdicts] == [
        (True, None, None), (True, None, None), (True, None, None), (True, None, None), (True, None, None),
        (False, DAY, NOW - 7200 + 86400),  # the day is full; the hour keeps its room (nothing counted)
        (False, OTHER, NOW + 3600),
        (True, None, None),  # the hour's fourth: the refused event was not counted in it
    ]  # fmt: skip
    assert [v.counted.keys if v.counted else () for v in verdicts] == [
        (HOUR.key, DAY.key), (HOUR.key, DAY.key), (OTHER.key,), (HOUR.key, DAY.key), (), (), (), (HOUR.key,)
    ]  # fmt: skip


def test_a_batch_of_events_is_one_redis_command():
    """A pipeline of one script per event cost redis-py about 30 µs an event to pack (README "Throughput")."""
    client = redis_client()
    rate_limits.hit_many([[OTHER]], NOW)  # loads the script

    def scripts_run() -> int:
        return client.info("commandstats")["cmdstat_evalsha"]["calls"]

    before = scripts_run()
    rate_limits.hit_many([[Window(f"rate:{n}:t:h", 3600, 3)] for n in range(100)], NOW)
    assert scripts_run() - before == 1
