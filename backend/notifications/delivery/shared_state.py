"""Where state shared by every worker lives: Redis when ``REDIS_URL`` is set, else this process.

Breaker state, token buckets, bulkheads and sent-markers may be lost and
rebuilt (DESIGN.md §3), so Redis is enough; on the embedded default they are
per process, which is what a one-machine demo needs.
"""

from functools import lru_cache

import redis
from django.conf import settings


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True, health_check_interval=30)


def redis_client() -> redis.Redis | None:
    """A shared client (its pool is thread-safe), or None on the embedded default."""
    return _client(settings.REDIS_URL) if settings.REDIS_URL else None
