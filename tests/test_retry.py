"""Full-jitter exponential backoff: uniform(0, min(cap, base · 2^attempt))."""

import random

import pytest

from backend.notifications.delivery.retry import backoff_delay


class Highest(random.Random):
    """Always draws the top of the range, exposing the ceiling."""

    def uniform(self, a, b):
        return b


# Ceilings worked out by hand from min(cap, base · 2^n) with base 2 s, cap 300 s.
@pytest.mark.parametrize(("attempt", "ceiling"), [(1, 4), (2, 8), (3, 16), (4, 32), (5, 64), (7, 256), (8, 300),
                                                  (20, 300)])  # fmt: skip
def test_ceiling_doubles_until_the_cap(attempt, ceiling):
    assert backoff_delay(attempt, base=2, cap=300, rng=Highest()) == ceiling


def test_delays_are_spread_over_the_whole_range():
    rng = random.Random(7)
    delays = [backoff_delay(3, base=2, cap=300, rng=rng) for _ in range(2000)]
    assert min(delays) >= 0 and max(delays) <= 16
    # Full jitter, not "equal jitter": a quarter of the draws fall in the lowest quarter.
    assert 0.2 < sum(d < 4 for d in delays) / len(delays) < 0.3


def test_attempt_zero_is_refused():
    with pytest.raises(ValueError, match="attempt must be at least 1, got 0"):
        backoff_delay(0, base=2, cap=300)
