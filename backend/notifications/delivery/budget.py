"""Provider budgets: a token bucket per provider with a share reserved for the high tier, and a bulkhead.

The provider's rate R (messages/second) is split into two buckets: high gets
``R·h`` and standard ``R·(1−h)`` (``h`` = ``high_share``). High traffic takes
from its own bucket first and may borrow from the standard one; standard
traffic only ever takes from its own, so it can never spend the reserved
share. Buckets refill continuously (token bucket, RFC 2697's committed
rate, without colours) and live in Redis so every worker shares them; the
refill uses Redis's own clock, so workers' clocks do not matter.

The bulkhead caps calls in flight per provider across all workers; a slot is
released after the call, or expires if its worker died.
"""

import threading
import time
import uuid
from dataclasses import dataclass

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client
from backend.notifications.providers.config import ProviderConfig

_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(b[1]) or capacity, tonumber(b[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], 3600)
return tostring(wait)
"""

_ACQUIRE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
  return 1
end
return 0
"""


@dataclass(frozen=True)
class Bucket:
    """One token bucket: ``rate`` tokens/second, holding at most ``capacity`` tokens."""

    key: str
    rate: float
    capacity: float


def buckets_for(config: ProviderConfig, tier: str) -> list[Bucket]:
    """The buckets ``tier`` may take from, in order; empty when the provider has no budget."""
    if not config.rate:
        return []
    burst = config.burst or config.rate
    share = config.high_share
    standard = Bucket(f"budget:{config.name}:standard", config.rate * (1 - share), max(1.0, burst * (1 - share)))
    if tier != "high":
        return [standard]
    if share <= 0:
        return [standard]
    high = Bucket(f"budget:{config.name}:high", config.rate * share, max(1.0, burst * share))
    return [high, standard]


_local_lock = threading.Lock()
_local_buckets: dict[str, tuple[float, float]] = {}
_local_slots: dict[str, dict[str, float]] = {}


def _take_local(bucket: Bucket) -> float:
    with _local_lock:
        now = time.monotonic()
        tokens, ts = _local_buckets.get(bucket.key, (bucket.capacity, now))
        tokens = min(bucket.capacity, tokens + max(0.0, now - ts) * bucket.rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / bucket.rate
        _local_buckets[bucket.key] = (tokens, now)
        return wait


def take_token(config: ProviderConfig, tier: str) -> float:
    """Take one send from the provider's budget for ``tier``.

    Returns 0.0 when a token was taken, else the seconds until one may be
    (the caller re-schedules the task that long; it never sleeps).
    """
    buckets = buckets_for(config, tier)
    if not buckets:
        return 0.0
    client = redis_client()
    waits = []
    for bucket in buckets:
        wait = float(client.eval(_TAKE, 1, bucket.key, bucket.rate, bucket.capacity)) if client else _take_local(bucket)
        if wait == 0.0:
            return 0.0
        waits.append(wait)
    return min(waits)


class Slot:
    """A bulkhead slot held for one provider call; ``release()`` it when the call returns."""

    def __init__(self, key: str | None):
        self.key = key
        self.member = uuid.uuid4().hex

    def release(self) -> None:
        if self.key is None:
            return
        client = redis_client()
        if client:
            try:
                with guard("bulkhead release"):
                    client.zrem(self.key, self.member)
            except RedisUnavailable:
                pass  # after a provider call, never fail the status write: the slot expires by itself
        else:
            with _local_lock:
                _local_slots.get(self.key, {}).pop(self.member, None)


def acquire_slot(config: ProviderConfig) -> Slot | None:
    """A slot under the provider's concurrency cap, or None when all are taken.

    A slot expires after twice the provider's timeout plus 5 s, so a worker
    killed mid-call does not hold it for ever.
    """
    if not config.concurrency:
        return Slot(None)
    key = f"inflight:{config.name}"
    slot = Slot(key)
    ttl = config.timeout * 2 + 5
    client = redis_client()
    if client:
        return slot if client.eval(_ACQUIRE_SLOT, 1, key, config.concurrency, ttl, slot.member) == 1 else None
    with _local_lock:
        now = time.monotonic()
        held = {m: t for m, t in _local_slots.get(key, {}).items() if t > now - ttl}
        if len(held) >= config.concurrency:
            _local_slots[key] = held
            return None
        held[slot.member] = now
        _local_slots[key] = held
        return slot
