"""Retry timing for transient provider errors."""

import random


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (1 = the first retry).

    Exponential backoff with full jitter: ``uniform(0, min(cap, base · 2^attempt))``
    (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015). Full
    jitter spreads the retries of many failed messages instead of sending
    them back to a recovering provider in synchronized waves.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be at least 1, got {attempt}")
    ceiling = min(cap, base * 2**attempt)
    return (rng or random).uniform(0, ceiling)
