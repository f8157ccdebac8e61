"""Idempotency keys: a Redis fast path before the UNIQUE constraint that guarantees it.

The fast path (``SET NX`` with a 24 h TTL through Django's cache, Redis when
``REDIS_URL`` is set) only tells a key certainly new from one possibly seen;
correctness rests on the database's UNIQUE index, so losing Redis loses no
guarantee. While Redis is unreachable every key counts as possibly seen: the
caller looks for the original in PostgreSQL, and a race between two new
requests is settled by the UNIQUE index as always.
"""

import hashlib
import json
from typing import Any

from django.conf import settings
from django.core.cache import cache

from backend.notifications.delivery.shared_state import RedisUnavailable, guard


def request_hash(payload: dict[str, Any]) -> str:
    """SHA-256 hex of the canonical JSON of ``payload`` (sorted keys, no spaces)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def first_sighting(scope: str, key: str) -> bool:
    """True when ``key`` was certainly not seen in ``scope`` in the last TTL; False when it may have been.

    False too when Redis is unreachable (fails towards the PostgreSQL lookup, never towards a duplicate).
    """
    # Hashed so that any caller-chosen key (spaces, unicode, 255 chars) is a safe cache key.
    digest = hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()
    try:
        with guard("idempotency fast path"):
            return cache.add(f"idem:{digest}", 1, timeout=settings.NOTIFY["IDEMPOTENCY_TTL"])
    except RedisUnavailable:
        return False
