"""Each API client's own rate (DESIGN.md §2, "rate-limit caller"): a token bucket of notifications a second.

One service in a loop must not fill the queues every other service's messages wait in. A client may
submit ``ApiClient.rate_limit`` notifications a second (``NOTIFY_API_CLIENT_RATE`` when it has none),
single and batch sends together: a batch of 1,000 takes 1,000 tokens at once, or none. The bucket holds
``NOTIFY_API_CLIENT_BURST_SECONDS`` of that rate, refills continuously (RFC 2697's committed rate, as
the providers' budgets, through the same ``budget.take_all``) and lives in Redis, on Redis's clock, so
every web process shares it. Without Redis (the embedded default) each process keeps its own.

A Redis outage (``shared_state.OUTAGE_ERRORS``: unreachable, read-only, out of memory) fails open: the
limit protects the platform's queues, and refusing every send while Redis is down would stop the
platform instead (README "When Redis or PostgreSQL is down").
"""

import math

from django.conf import settings
from rest_framework.exceptions import APIException, Throttled

from backend.notifications.delivery import budget
from backend.notifications.delivery.shared_state import RedisUnavailable, guard
from backend.notifications.models import ApiClient

# The buckets' keys: one per client, ``api-rate:<pk>``.
_KEY = "api-rate:"


class BatchOverBurst(APIException):
    """413 ``batch_over_burst``: more notifications in one request than the client's bucket ever holds; split it.

    Not a 429: a client that retries every 429 would send it again for ever, and it can never pass.
    """

    status_code = 413
    default_code = "batch_over_burst"


def rate_of(client: ApiClient) -> tuple[float, float]:
    """``(rate, capacity)``: the client's notifications a second and the most its bucket holds (at least 1)."""
    rate = float(client.rate_limit or settings.NOTIFY["API_CLIENT_RATE"])
    return rate, max(1.0, math.floor(rate * settings.NOTIFY["API_CLIENT_BURST_SECONDS"]))


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
    try:
        with guard("API client rate"):
            wait = budget.take_all(budget.Bucket(f"{_KEY}{client.pk}", rate, capacity), count)
    except RedisUnavailable:
        return
    if wait > 0:
        raise Throttled(
            wait=math.ceil(wait),
            detail=f"This API client may submit {rate:,.0f} notifications a second and is over it: nothing was "
            "accepted; retry with the same idempotency keys.",
        )


def reset() -> None:
    """Forget the per-process buckets (tests)."""
    budget.forget_local(_KEY)
