"""Provider budgets: a token bucket per provider with a share reserved for the high tier, and a bulkhead.

The provider's rate R (messages/second) is split into two buckets: high gets
``R·h`` and standard ``R·(1−h)`` (``h`` = ``high_share``). High traffic takes
from its own bucket first and may borrow from the standard one; standard
traffic only ever takes from its own, so it can never spend the reserved
share. Buckets refill continuously (token bucket, RFC 2697's committed
rate, without colours) and live in Redis so every worker shares them; the
refill uses Redis's own clock, so workers' clocks do not matter.

The bulkhead caps calls in flight per provider across all workers; a slot is
released after the call, or expires if its worker died. The standard tier may
hold at most ``concurrency·(1−h)`` of them (at least one): a standard batch
that fills its share still leaves the high tier slots, as the budget leaves it
tokens, so an OTP never waits behind a batch.

A batch worker takes what its batch needs in one call each (``take_tokens``,
``acquire_slots``: one Lua script, one round trip), and gets fewer when the
budget or the bulkhead has fewer.
"""

import math
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client
from backend.notifications.providers.config import ProviderConfig

# ARGV: rate (tokens/s), capacity, tokens wanted. Takes them all or none; returns the seconds until all
# would be there (0 when taken).
_TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local rate, capacity, want = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(b[1]) or capacity, tonumber(b[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= want then tokens = tokens - want else wait = (want - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('EXPIRE', KEYS[1], 3600)
return tostring(wait)
"""

# Up to ARGV[1] tokens from KEYS in order (ARGV[2i], ARGV[2i+1]: rate and capacity of KEYS[i]);
# returns {granted, seconds until the next token of the fullest bucket}.
_TAKE_MANY = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local want, granted, wait = tonumber(ARGV[1]), 0, nil
for i, key in ipairs(KEYS) do
  local rate, capacity = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local b = redis.call('HMGET', key, 'tokens', 'ts')
  local tokens, ts = tonumber(b[1]) or capacity, tonumber(b[2]) or now
  tokens = math.min(capacity, tokens + math.max(0, now - ts) * rate)
  local take = math.min(want - granted, math.floor(tokens))
  if take > 0 then
    tokens = tokens - take
    granted = granted + take
  end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', tostring(now))
  redis.call('EXPIRE', key, 3600)
  local next_token = math.max(0, (1 - tokens) / rate)
  if wait == nil or next_token < wait then wait = next_token end
  if granted >= want then break end
end
return {granted, tostring(wait or 0)}
"""

# Adds members ARGV[3…] while fewer than ARGV[1] are held (expired ones, older than ARGV[2] s, dropped first);
# returns how many were added.
_ACQUIRE_SLOTS = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
local free = tonumber(ARGV[1]) - redis.call('ZCARD', KEYS[1])
local added = 0
for i = 3, #ARGV do
  if added >= free then break end
  redis.call('ZADD', KEYS[1], now, ARGV[i])
  added = added + 1
end
if added > 0 then redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1) end
return added
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


def _take_local(bucket: Bucket, count: int) -> float:
    with _local_lock:
        now = time.monotonic()
        tokens, ts = _local_buckets.get(bucket.key, (bucket.capacity, now))
        tokens = min(bucket.capacity, tokens + max(0.0, now - ts) * bucket.rate)
        wait = 0.0
        if tokens >= count:
            tokens -= count
        else:
            wait = (count - tokens) / bucket.rate
        _local_buckets[bucket.key] = (tokens, now)
        return wait


def take_all(bucket: Bucket, count: int = 1) -> float:
    """Take ``count`` tokens of ``bucket`` at once, or none: 0.0 when taken, else the seconds until they would be.

    In Redis (one Lua call, on Redis's clock) when ``REDIS_URL`` is set, else in this process. Raises what
    the Redis client raises: its callers decide the direction of an outage (``api/caller_rate.py``).
    """
    client = redis_client()
    if client is None:
        return _take_local(bucket, count)
    return float(client.eval(_TAKE, 1, bucket.key, bucket.rate, bucket.capacity, count))


def forget_local(prefix: str) -> None:
    """Drop this process's buckets whose key starts with ``prefix`` (tests)."""
    with _local_lock:
        for key in [key for key in _local_buckets if key.startswith(prefix)]:
            del _local_buckets[key]


def take_token(config: ProviderConfig, tier: str) -> float:
    """Take one send from the provider's budget for ``tier``.

    Returns 0.0 when a token was taken, else the seconds until one may be
    (the caller re-schedules the task that long; it never sleeps).
    """
    buckets = buckets_for(config, tier)
    if not buckets:
        return 0.0
    waits = []
    for bucket in buckets:
        wait = take_all(bucket)
        if wait == 0.0:
            return 0.0
        waits.append(wait)
    return min(waits)


def _take_local_many(bucket: Bucket, want: int) -> tuple[int, float]:
    with _local_lock:
        now = time.monotonic()
        tokens, ts = _local_buckets.get(bucket.key, (bucket.capacity, now))
        tokens = min(bucket.capacity, tokens + max(0.0, now - ts) * bucket.rate)
        take = min(want, math.floor(tokens))
        tokens -= take
        _local_buckets[bucket.key] = (tokens, now)
        return take, max(0.0, (1 - tokens) / bucket.rate)


def take_tokens(config: ProviderConfig, tier: str, count: int) -> tuple[int, float]:
    """Take up to ``count`` sends from the provider's budget for ``tier`` at once (a batch's share).

    Returns ``(granted, wait)``: how many tokens were taken (0 … ``count``), and the seconds until
    the next one (0.0 when all were granted); the caller re-schedules the rest of its batch, spread
    from ``wait`` on at the bucket's rate. Standard traffic takes only from its own bucket, so
    a batch can never spend the high tier's reserve.
    """
    buckets = buckets_for(config, tier)
    if not buckets or count <= 0:
        return max(count, 0), 0.0
    client = redis_client()
    if client:
        args = [count] + [value for bucket in buckets for value in (bucket.rate, bucket.capacity)]
        granted, wait = client.eval(_TAKE_MANY, len(buckets), *[b.key for b in buckets], *args)
        granted, wait = int(granted), float(wait)
    else:
        granted, waits = 0, []
        for bucket in buckets:
            took, next_token = _take_local_many(bucket, count - granted)
            granted += took
            waits.append(next_token)
            if granted >= count:
                break
        wait = min(waits)
    return granted, 0.0 if granted >= count else wait


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


def slot_cap(config: ProviderConfig, tier: str) -> int:
    """How many of the provider's bulkhead slots ``tier`` may hold: all for high, ``(1−h)`` of them for standard."""
    if tier == "high":
        return config.concurrency
    return max(1, math.floor(config.concurrency * (1 - config.high_share)))


def acquire_slot(config: ProviderConfig, tier: str = "high") -> Slot | None:
    """A slot under the provider's concurrency cap for ``tier`` (``slot_cap``), or None when all are taken.

    A slot expires after twice the provider's timeout plus 5 s, so a worker
    killed mid-call does not hold it for ever.
    """
    slots = acquire_slots(config, 1, tier)
    return slots[0] if slots else None


def acquire_slots(config: ProviderConfig, count: int, tier: str) -> list[Slot]:
    """Up to ``count`` slots under the provider's cap for ``tier``, in one round trip; fewer (or none) when taken."""
    if not config.concurrency:
        return [Slot(None) for _ in range(count)]
    key = f"inflight:{config.name}"
    slots = [Slot(key) for _ in range(count)]
    ttl = config.timeout * 2 + 5
    cap = slot_cap(config, tier)
    client = redis_client()
    if client:
        granted = client.eval(_ACQUIRE_SLOTS, 1, key, cap, ttl, *[slot.member for slot in slots])
        return slots[: int(granted)]
    with _local_lock:
        now = time.monotonic()
        held = {m: t for m, t in _local_slots.get(key, {}).items() if t > now - ttl}
        granted = slots[: max(0, cap - len(held))]
        held.update({slot.member: now for slot in granted})
        _local_slots[key] = held
        return granted


def release_slots(slots: Sequence[Slot]) -> None:
    """Release many slots of one provider at once (one ZREM); like ``Slot.release``, never raises for Redis."""
    held = [slot for slot in slots if slot.key is not None]
    if not held:
        return
    client = redis_client()
    if client:
        try:
            with guard("bulkhead release"):
                client.zrem(held[0].key, *[slot.member for slot in held])
        except RedisUnavailable:
            pass  # the slots expire by themselves
        return
    with _local_lock:
        for slot in held:
            _local_slots.get(slot.key, {}).pop(slot.member, None)
