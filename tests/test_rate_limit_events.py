"""rate_limits.forget: an event counted for a send that did not happen gives its place back."""

import pytest

from backend.notifications import rate_limits
from backend.notifications.rate_limits import Window

NOW = 1_800_000_000.0
HOUR, DAY = Window("rate:7:t:h", 3600, 2), Window("rate:7:t:d", 86400, 2)


@pytest.fixture(params=["redis", "in process"])
def shared_state(request, settings):
    """The windows in Redis, and in this process as on the embedded default."""
    if request.param == "in process":
        settings.REDIS_URL = ""
        rate_limits.reset_local()
        yield
        rate_limits.reset_local()
    else:
        yield


def test_an_allowed_hit_names_the_event_it_counted_in_every_window(shared_state):
    verdict = rate_limits.hit([HOUR, DAY], NOW)

    assert verdict.allowed
    assert (verdict.counted.keys, verdict.counted.at, len(verdict.counted.member)) == (
        ("rate:7:t:h", "rate:7:t:d"), NOW, 32
    )  # fmt: skip
    assert rate_limits.count(HOUR.key, 3600, NOW) == rate_limits.count(DAY.key, 86400, NOW) == 1


def test_a_refused_hit_counted_nothing_to_forget(shared_state):
    rate_limits.hit([HOUR], NOW - 10)
    rate_limits.hit([HOUR], NOW - 5)

    refused = rate_limits.hit([HOUR, DAY], NOW)

    assert (refused.allowed, refused.refused_by, refused.counted) == (False, HOUR, None)
    assert rate_limits.count(DAY.key, 86400, NOW) == 0


def test_forgetting_an_event_gives_its_place_back_in_each_window_and_only_its_own(shared_state):
    kept = rate_limits.hit([HOUR, DAY], NOW - 60).counted
    forgotten = rate_limits.hit([HOUR, DAY], NOW - 30).counted
    assert not rate_limits.hit([HOUR, DAY], NOW).allowed  # both windows full

    rate_limits.forget([forgotten])

    assert rate_limits.count(HOUR.key, 3600, NOW) == rate_limits.count(DAY.key, 86400, NOW) == 1
    assert rate_limits.hit([HOUR, DAY], NOW).allowed  # the forgotten place, taken again
    assert not rate_limits.hit([HOUR, DAY], NOW).allowed
    rate_limits.forget([kept, kept])  # twice, or after expiry: nothing more to remove
    assert rate_limits.count(HOUR.key, 3600, NOW) == 1


def test_events_of_a_batch_are_forgotten_as_those_of_single_hits(shared_state):
    verdicts = rate_limits.hit_many([[HOUR], [], [HOUR, DAY], [HOUR]], NOW)

    assert [v.allowed for v in verdicts] == [True, True, True, False]
    assert [v.counted.keys if v.counted else None for v in verdicts] == [
        ("rate:7:t:h",), None, ("rate:7:t:h", "rate:7:t:d"), None
    ]  # fmt: skip
    rate_limits.forget([verdicts[2].counted])
    assert (rate_limits.count(HOUR.key, 3600, NOW), rate_limits.count(DAY.key, 86400, NOW)) == (1, 0)


def test_forgetting_nothing_asks_redis_nothing(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there: a call would raise

    rate_limits.forget([])
