"""The two delivery tiers, each its own Huey queue consumed by its own worker pool.

High (OTP, security alerts) and standard (updates, marketing) never share a
queue, so a campaign backlog cannot delay a login code (DESIGN.md §2).
With ``REDIS_URL`` set the queues live in Redis (``PriorityRedisHuey``: plain
``RedisHuey`` refuses task priorities); without it, in SQLite files under
``NOTIFY_DATA_DIR`` for the embedded demo. ``immediate`` is set explicitly,
never derived from ``DEBUG``.
"""

from django.conf import settings
from huey import Huey, PriorityRedisHuey, SqliteHuey
from redis import ConnectionPool

TIERS = ("high", "standard")
# Seconds a worker's blocking pop (BZPOPMIN) waits for a task before polling again (Huey's default).
READ_TIMEOUT = 1


def _make_huey(tier: str) -> Huey:
    name = f"notify-{tier}"
    if settings.REDIS_URL:
        # The worker's blocking pop waits up to READ_TIMEOUT s for a task: the socket must outlast it.
        options = {**settings.REDIS_CLIENT_OPTIONS, "socket_timeout": READ_TIMEOUT + settings.REDIS_SOCKET_TIMEOUT}
        pool = ConnectionPool.from_url(settings.REDIS_URL, **options)
        return PriorityRedisHuey(
            name, connection_pool=pool, read_timeout=READ_TIMEOUT, immediate=settings.HUEY_IMMEDIATE, results=False
        )
    return SqliteHuey(
        name,
        filename=str(settings.DATA_DIR / f"huey-{tier}.sqlite3"),
        immediate=settings.HUEY_IMMEDIATE,
        results=False,
    )


HUEYS: dict[str, Huey] = {tier: _make_huey(tier) for tier in TIERS}
