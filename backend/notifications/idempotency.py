"""Idempotency keys: a Redis fast path before the UNIQUE constraint that guarantees it.

The fast path (``SET NX`` with a 24 h TTL in Redis when ``REDIS_URL`` is set, through the shared
client of ``shared_state``; Django's local cache on the embedded default) only tells a key
certainly new from one possibly seen; correctness rests on the database's UNIQUE index, so losing Redis loses no
guarantee. While Redis is unreachable every key counts as possibly seen: the
caller looks for the original in PostgreSQL, and a race between two new
requests is settled by the UNIQUE index as always.
"""

import hashlib
import hmac
import json
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.utils.crypto import salted_hmac

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client

_SALT = "notify.idempotency.request"
# SET key 1 EX ttl for every key: ``mark_seen`` in one command.
_MARK_SEEN = "for _, key in ipairs(KEYS) do redis.call('SET', key, 1, 'EX', ARGV[1]) end"


def _canonical(payload: dict[str, Any]) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


@lru_cache(maxsize=8)
def _keyed(secret: str) -> hmac.HMAC:
    """Django's ``salted_hmac`` under ``secret`` before any message: copied per hash, its key derived once."""
    return salted_hmac(_SALT, b"", secret=secret, algorithm="sha256")


def _hmac(canonical: str, secret: str) -> str:
    """``salted_hmac(_SALT, canonical, secret=secret, algorithm="sha256").hexdigest()``, at half its cost."""
    keyed = _keyed(secret).copy()
    keyed.update(canonical.encode())
    return keyed.hexdigest()


def request_hash(payload: dict[str, Any]) -> str:
    """HMAC-SHA256 hex, keyed with ``SECRET_KEY``, of the canonical JSON of ``payload`` (sorted keys, no spaces).

    Keyed because a payload may carry a secret param: a plain hash of a six-digit OTP code and
    otherwise known fields gives the code back after a million guesses (masking.py). The HMAC is
    Django's ``salted_hmac`` (salt ``notify.idempotency.request``), its key derived once per secret.
    """
    return _hmac(_canonical(payload), settings.SECRET_KEY)


def same_request(stored_hash: str, payload: dict[str, Any]) -> bool:
    """Whether ``stored_hash`` is ``payload``'s hash under ``SECRET_KEY`` or one of ``SECRET_KEY_FALLBACKS``.

    Also accepts the unkeyed SHA-256 that rows stored before hashes were keyed hold.
    """
    canonical = _canonical(payload)
    keyed = (_hmac(canonical, key) for key in [settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS])
    candidates = [*keyed, hashlib.sha256(canonical.encode()).hexdigest()]
    return any(hmac.compare_digest(stored_hash, candidate) for candidate in candidates)


def _cache_key(scope: str, key: str) -> str:
    # Hashed so that any caller-chosen key (spaces, unicode, 255 chars) is a safe cache key.
    return "idem:" + hashlib.sha256(f"{scope}\n{key}".encode()).hexdigest()


def mark_seen(scope: str, keys: list[str]) -> None:
    """Record ``keys`` as seen in ``scope`` in one Redis command, so a later single send looks for their originals.

    For keys stored without ``first_sighting`` (the batch endpoint reads its originals from the
    database). Best effort: without Redis nothing is marked, and the UNIQUE index still decides.
    """
    ttl = settings.NOTIFY["IDEMPOTENCY_TTL"]
    client = redis_client()
    try:
        with guard("idempotency fast path"):
            if client is None:
                cache.set_many({_cache_key(scope, key): 1 for key in keys}, timeout=ttl)
                return
            # One script for all the keys, not a pipeline of SETs: redis-py packs each command in Python.
            client.register_script(_MARK_SEEN)(keys=[_cache_key(scope, key) for key in keys], args=[ttl])
    except RedisUnavailable:
        return


def first_sighting(scope: str, key: str) -> bool:
    """True when ``key`` was certainly not seen in ``scope`` in the last TTL; False when it may have been.

    False too when Redis is unreachable (fails towards the PostgreSQL lookup, never towards a duplicate).
    """
    ttl = settings.NOTIFY["IDEMPOTENCY_TTL"]
    # The shared client, not Django's cache: its Redis backend builds a client object per call,
    # about a millisecond of every send (README "Throughput").
    client = redis_client()
    try:
        with guard("idempotency fast path"):
            if client is None:
                return cache.add(_cache_key(scope, key), 1, timeout=ttl)
            return bool(client.set(_cache_key(scope, key), 1, nx=True, ex=ttl))
    except RedisUnavailable:
        return False
