"""Liveness and readiness probes.

``/healthz`` (liveness) says the process answers and touches nothing else: a
database or Redis outage must not get healthy web processes restarted.
``/readyz`` (readiness) asks PostgreSQL for ``SELECT 1`` and Redis for
``PING`` (when ``REDIS_URL`` is set), each bounded by its client's timeouts
(PostgreSQL ``connect_timeout``, ``REDIS_CONNECT_TIMEOUT`` /
``REDIS_SOCKET_TIMEOUT``), and says which answered. A load balancer takes a
process that is not ready out of rotation until it is again.
"""

import logging
from collections.abc import Callable

import redis
from django.db import DatabaseError, connection
from django.http import JsonResponse
from django.views.decorators.http import require_GET

from backend.notifications.delivery.shared_state import redis_client

logger = logging.getLogger(__name__)


@require_GET
def healthz(request):
    """Liveness for nginx, the demo script and orchestrators: no dependency is asked."""
    return JsonResponse({"status": "ok"})


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _redis() -> str:
    client = redis_client()
    if client is None:
        return "not-configured"
    client.ping()
    return "ok"


def _check(name: str, probe: Callable[[], str | None]) -> str:
    """``"ok"`` (or what the probe says), else ``"down: <error class>"``; details go to the log, not the page."""
    try:
        return probe() or "ok"
    except (DatabaseError, redis.RedisError) as exc:
        logger.warning("readiness: %s is down: %s", name, exc)
        return f"down: {exc.__class__.__name__}"


@require_GET
def readyz(request):
    """Readiness: 200 ``{"status": "ready", "checks": {...}}`` when every dependency answers, else 503."""
    checks = {"database": _check("database", _database), "redis": _check("redis", _redis)}
    ready = not any(result.startswith("down") for result in checks.values())
    return JsonResponse({"status": "ready" if ready else "unavailable", "checks": checks}, status=200 if ready else 503)
