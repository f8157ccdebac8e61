"""Where state shared by every worker lives: Redis when ``REDIS_URL`` is set, else this process.

Breaker state, token buckets, bulkheads, sent-markers, counters and the
queues may be lost and rebuilt (DESIGN.md §3), so Redis is enough; on the
embedded default they are per process, which is what a one-machine demo needs.

Redis being rebuildable also means Redis being down must not fail a send:
every Redis call of the accept path runs inside ``guard``, which turns an
unreachable Redis into ``RedisUnavailable`` for its caller to handle in the
direction that caller documents (README "When Redis or PostgreSQL is down").
After a failure Redis is skipped for ``DOWN_MEMO_SECONDS``, so a burst of
requests during an outage does not pay a connection attempt each.
"""

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

import redis
from django.conf import settings

logger = logging.getLogger(__name__)

# Seconds Redis is skipped after a connection error or timeout (per process).
DOWN_MEMO_SECONDS = 1.0

# An unreachable or unanswering Redis (BusyLoadingError, Redis still loading after a restart,
# is a ConnectionError), or one that answers but refuses every write: a read-only replica after a
# failover, or OOM under noeviction; either way Redis cannot do its part just now. Other errors are
# bugs, not outages, and stay errors.
OUTAGE_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError, redis.exceptions.OutOfMemoryError)

_now = time.monotonic
_memo_lock = threading.Lock()
_down_until = 0.0


class RedisUnavailable(Exception):
    """Redis could not be reached just now (or was skipped: it failed less than a second ago)."""


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    # settings.REDIS_CLIENT_OPTIONS: the short timeouts every Redis client of the project uses.
    return redis.Redis.from_url(url, decode_responses=True, health_check_interval=30, **settings.REDIS_CLIENT_OPTIONS)


def redis_client() -> redis.Redis | None:
    """A shared client (its pool is thread-safe), or None on the embedded default."""
    return _client(settings.REDIS_URL) if settings.REDIS_URL else None


def redis_down() -> bool:
    """True while a recent failure says Redis is unreachable (for ``DOWN_MEMO_SECONDS``)."""
    return _now() < _down_until


def _mark_down() -> None:
    global _down_until
    with _memo_lock:
        _down_until = _now() + DOWN_MEMO_SECONDS


def reset() -> None:
    """Forget a remembered outage (tests)."""
    global _down_until
    with _memo_lock:
        _down_until = 0.0


@contextmanager
def guard(what: str) -> Iterator[None]:
    """Run the Redis calls of the ``with`` block; raise ``RedisUnavailable`` if Redis is unreachable.

    ``what`` names the concern in the log ("idempotency fast path"). While a
    recent failure is remembered the block does not run at all.
    """
    if redis_down():
        raise RedisUnavailable(f"{what}: skipped, Redis failed less than {DOWN_MEMO_SECONDS:g} s ago")
    try:
        yield
    except OUTAGE_ERRORS as exc:
        _mark_down()
        logger.warning("Redis unreachable (%s): %s", what, exc)
        raise RedisUnavailable(f"{what}: {exc}") from exc
