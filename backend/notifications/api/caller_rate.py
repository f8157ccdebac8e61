"""Each API client's own rate (DESIGN.md §2, "rate-limit caller"): a token bucket of notifications a second.

One service in a loop must not fill the queues every other service's messages wait in. A client may
submit ``ApiClient.rate_limit`` notifications a second (``NOTIFY_API_CLIENT_RATE`` when it has none),
single and batch sends together: a batch of 1,000 takes 1,000 tokens at once, or none. The bucket holds
``NOTIFY_API_CLIENT_BURST_SECONDS`` of that rate, refills continuously (RFC 2697's committed rate, as
the providers' budgets in ``delivery/budget.py``) and lives in Redis, on Redis's clock, so every web
process shares it. Without Redis (the embedded default) each process keeps its own.

A Redis outage fails open: the limit protects the platform's queues, and refusing every send while
Redis is down would stop the platform instead (README "When Redis or PostgreSQL is down").
"""

import logging
import math
import threading
import time

from django.conf import settings
from redis import RedisError
from rest_framework.exceptions import APIException, Throttled

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client
from backend.notifications.models import ApiClient

logger = logging.getLogger(__name__)

# ARGV: rate (tokens/s), capacity, tokens wanted. Takes them all or none; returns the seconds until all
# would be there (0 when taken).
_TAKE_ALL = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local rate, capacity, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(b[1]) or capacity, tonumber(b[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= want then tokens = tokens - want else wait = (want - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], math.ceil(capacity / rate) + 1)
return tostring(wait)
"""


class BatchOverBurst(APIException):
    """413 ``batch_over_burst``: more notifications in one request than the client's bucket ever holds; split it.

    Not a 429: a client that retries every 429 would send it again for ever, and it can never pass.
    """

    status_code = 413
    default_code = "batch_over_burst"


_local_lock = threading.Lock()
_local: dict[int, tuple[float, float]] = {}


def rate_of(client: ApiClient) -> tuple[float, float]:
    """``(rate, capacity)``: the client's notifications a second and the most its bucket holds (at least 1)."""
    rate = float(client.rate_limit or settings.NOTIFY["API_CLIENT_RATE"])
    return rate, max(1.0, math.floor(rate * settings.NOTIFY["API_CLIENT_BURST_SECONDS"]))


def _take_local(client: ApiClient, rate: float, capacity: float, count: int) -> float:
    with _local_lock:
        now = time.monotonic()
        tokens, ts = _local.get(client.pk, (capacity, now))
        tokens = min(capacity, tokens + max(0.0, now - ts) * rate)
        wait = 0.0
        if tokens >= count:
            tokens -= count
        else:
            wait = (count - tokens) / rate
        _local[client.pk] = (tokens, now)
        return wait


def take(client: ApiClient, count: int = 1) -> None:
    """Count ``count`` notifications against ``client``'s rate, or refuse them all.

    Raises DRF's ``Throttled`` (429, ``Retry-After`` in whole seconds) when the bucket holds fewer than
    ``count`` tokens now, and ``BatchOverBurst`` (413) when ``count`` is more than it can ever hold: the
    batch must be split. Nothing is taken from a refused request, so its retry with the same idempotency keys is whole.
    """
    rate, capacity = rate_of(client)
    if count > capacity:
        raise BatchOverBurst(
            detail=f"This API client may submit {rate:,.0f} notifications a second, at most {capacity:,.0f} at "
            f"once: a batch of {count:,} can never pass. Send at most {capacity:,.0f} items a request."
        )
    redis = redis_client()
    if redis is None:
        wait = _take_local(client, rate, capacity, count)
    else:
        try:
            with guard("API client rate"):
                wait = float(redis.eval(_TAKE_ALL, 1, f"api-rate:{client.pk}", rate, capacity, count))
        except RedisUnavailable:
            return
        except RedisError as exc:
            # Redis answers but refuses (a read-only replica after a failover, OOM under noeviction): the same
            # direction as an outage, logged, so that a limit never turns into a 500.
            logger.warning("API client rate not counted for %s: %s", client.name, exc)
            return
    if wait > 0:
        raise Throttled(
            wait=math.ceil(wait),
            detail=f"This API client may submit {rate:,.0f} notifications a second and is over it: nothing was "
            "accepted; retry with the same idempotency keys.",
        )


def reset() -> None:
    """Forget the per-process buckets (tests)."""
    with _local_lock:
        _local.clear()
