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

TIERS = ("high", "standard")


def _make_huey(tier: str) -> Huey:
    name = f"notify-{tier}"
    if settings.REDIS_URL:
        return PriorityRedisHuey(name, url=settings.REDIS_URL, immediate=settings.HUEY_IMMEDIATE, results=False)
    return SqliteHuey(
        name,
        filename=str(settings.DATA_DIR / f"huey-{tier}.sqlite3"),
        immediate=settings.HUEY_IMMEDIATE,
        results=False,
    )


HUEYS: dict[str, Huey] = {tier: _make_huey(tier) for tier in TIERS}
