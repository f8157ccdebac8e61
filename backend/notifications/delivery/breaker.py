"""A circuit breaker per provider, shared by every worker (state in Redis).

closed → open when ``BREAKER_CONSECUTIVE_FAILURES`` calls fail in a row, or
when at least ``BREAKER_MIN_CALLS`` calls in the last ``BREAKER_WINDOW``
seconds failed at a rate of ``BREAKER_FAILURE_RATE`` or more; open → half-open
after ``BREAKER_COOLDOWN`` seconds, letting exactly one probe call through;
the probe's success closes it, its failure opens it again (Nygard, *Release
It!*, 2nd ed., ch. 5 "Circuit Breaker"). Only transient failures count: a
permanent error is about the message, not the provider. Every transition is
logged and stored as a ``BreakerEvent``.
"""

import logging
import threading
import time
import uuid

from django.conf import settings

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client
from backend.notifications.models import BreakerEvent

logger = logging.getLogger(__name__)

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half-open"

_ALLOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
if state == 'closed' then return 'allow' end
local since = tonumber(redis.call('HGET', KEYS[1], 'since') or '0')
if now - since < tonumber(ARGV[1]) then return 'deny' end
redis.call('HSET', KEYS[1], 'state', 'half-open', 'since', tostring(now))
return 'probe:' .. state
"""

# Records the outcomes ARGV[5] ("1" ok, "0" failed, in call order) one after the other; ARGV[1..4]: consecutive
# failures, failure rate, minimum calls, window (s); ARGV[6]: a unique prefix for the window's members.
# Returns each transition that happened ("from>to[:detail]"), then the state after the last outcome.
_RECORD = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local window, outcomes, out = tonumber(ARGV[4]), ARGV[5], {}
for i = 1, #outcomes do
  local ok, member = string.sub(outcomes, i, i) == '1', ARGV[6] .. ':' .. i
  local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
  if state == 'half-open' then
    if ok then
      redis.call('HSET', KEYS[1], 'state', 'closed', 'since', tostring(now), 'consecutive', 0)
      redis.call('DEL', KEYS[2], KEYS[3])
      table.insert(out, 'half-open>closed')
    else
      redis.call('HSET', KEYS[1], 'state', 'open', 'since', tostring(now))
      table.insert(out, 'half-open>open')
    end
  elseif state == 'closed' then
    redis.call('ZADD', KEYS[2], now, member)
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
    redis.call('EXPIRE', KEYS[2], math.ceil(window) + 1)
    if ok then
      redis.call('HSET', KEYS[1], 'consecutive', 0)
    else
      redis.call('ZADD', KEYS[3], now, member)
      redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - window)
      redis.call('EXPIRE', KEYS[3], math.ceil(window) + 1)
      local consecutive = redis.call('HINCRBY', KEYS[1], 'consecutive', 1)
      local calls, fails = redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3])
      if consecutive >= tonumber(ARGV[1]) or (calls >= tonumber(ARGV[3]) and fails / calls >= tonumber(ARGV[2])) then
        redis.call('HSET', KEYS[1], 'state', 'open', 'since', tostring(now))
        table.insert(out, 'closed>open:' .. consecutive .. ':' .. fails .. '/' .. calls)
      end
    end
  end
end
table.insert(out, redis.call('HGET', KEYS[1], 'state') or 'closed')
return out
"""


class _LocalStore:
    """The same rules for one process (embedded default), under a lock."""

    def __init__(self):
        self.lock = threading.Lock()
        self.state: dict[str, dict] = {}

    def allow(self, provider: str, cooldown: float) -> str:
        with self.lock:
            entry = self.state.setdefault(provider, {"state": CLOSED, "since": 0.0, "consecutive": 0, "calls": []})
            if entry["state"] == CLOSED:
                return "allow"
            if time.time() - entry["since"] < cooldown:
                return "deny"
            previous, entry["state"], entry["since"] = entry["state"], HALF_OPEN, time.time()
            return f"probe:{previous}"

    def record(self, provider: str, ok: bool, conf: dict) -> str:
        with self.lock:
            entry = self.state.setdefault(provider, {"state": CLOSED, "since": 0.0, "consecutive": 0, "calls": []})
            now = time.time()
            if entry["state"] == HALF_OPEN:
                entry.update(state=CLOSED if ok else OPEN, since=now, consecutive=0, calls=[])
                return f"half-open>{entry['state']}"
            if entry["state"] == OPEN:
                return ""
            entry["calls"] = [c for c in entry["calls"] if c[0] > now - conf["BREAKER_WINDOW"]] + [(now, ok)]
            if ok:
                entry["consecutive"] = 0
                return ""
            entry["consecutive"] += 1
            calls, fails = len(entry["calls"]), sum(1 for c in entry["calls"] if not c[1])
            if entry["consecutive"] >= conf["BREAKER_CONSECUTIVE_FAILURES"] or (
                calls >= conf["BREAKER_MIN_CALLS"] and fails / calls >= conf["BREAKER_FAILURE_RATE"]
            ):
                entry.update(state=OPEN, since=now)
                return f"closed>open:{entry['consecutive']}:{fails}/{calls}"
            return ""


_local = _LocalStore()


def _keys(provider: str) -> list[str]:
    return [f"breaker:{provider}", f"breaker:{provider}:calls", f"breaker:{provider}:fails"]


def _store_event(provider: str, transition: str) -> None:
    states, _, detail = transition.partition(":")
    from_state, to_state = states.split(">")
    if from_state == CLOSED:
        consecutive, _, rate = detail.partition(":")
        reason = f"{consecutive} consecutive failures, {rate} failed in the window"
    elif from_state == OPEN:
        reason = "cool-down over: one probe call"
    else:
        reason = "probe succeeded" if to_state == CLOSED else "probe failed"
    logger.warning("circuit breaker %s: %s → %s (%s)", provider, from_state, to_state, reason)
    BreakerEvent.objects.create(provider=provider, from_state=from_state, to_state=to_state, reason=reason)


def admit(provider: str) -> str:
    """What may go to ``provider`` now: "allow" (closed), "deny" (open) or "probe" (exactly one call).

    A batch worker sends one call of its batch on "probe" and re-schedules the rest.
    """
    cooldown = settings.NOTIFY["BREAKER_COOLDOWN"]
    client = redis_client()
    verdict = client.eval(_ALLOW, 1, _keys(provider)[0], cooldown) if client else _local.allow(provider, cooldown)
    if verdict.startswith("probe:"):
        _store_event(provider, f"{verdict.split(':', 1)[1]}>{HALF_OPEN}")
        return "probe"
    return verdict


def allow(provider: str) -> bool:
    """May a call go to ``provider`` now? While open, no; after the cool-down, one probe."""
    return admit(provider) != "deny"


def record(provider: str, ok: bool) -> None:
    """Record a call's outcome: ``ok`` False for a transient failure (timeouts, 429, 5xx).

    Without Redis the outcome is not counted (it comes after the call; its status write must not fail).
    """
    record_many(provider, [ok])


def record_many(provider: str, outcomes: list[bool]) -> bool:
    """Record calls' outcomes in order (``record``'s meaning of ``ok``) in one Lua call: a batch's wave.

    Returns True when the breaker is open after them: the batch worker then stops the rest of
    its batch for that provider. Without Redis, like ``record``, the outcomes are not counted.
    """
    if not outcomes:
        return False
    conf = settings.NOTIFY
    client = redis_client()
    if client:
        try:
            with guard("breaker record"):
                *transitions, now = client.eval(
                    _RECORD, 3, *_keys(provider), conf["BREAKER_CONSECUTIVE_FAILURES"], conf["BREAKER_FAILURE_RATE"],
                    conf["BREAKER_MIN_CALLS"], conf["BREAKER_WINDOW"], "".join("1" if ok else "0" for ok in outcomes),
                    uuid.uuid4().hex,
                )  # fmt: skip
        except RedisUnavailable:
            return False
    else:
        transitions = [_local.record(provider, ok, conf) for ok in outcomes]
        now = _local.state.get(provider, {}).get("state", CLOSED)
    for transition in filter(None, transitions):
        _store_event(provider, transition)
    return now == OPEN


def state(provider: str) -> str:
    """The breaker's current state: closed, open or half-open."""
    client = redis_client()
    if client:
        return client.hget(_keys(provider)[0], "state") or CLOSED
    return _local.state.get(provider, {}).get("state", CLOSED)


def reset(provider: str) -> None:
    """Forget the breaker's state (tests, and an operator after fixing a provider)."""
    client = redis_client()
    if client:
        client.delete(*_keys(provider))
    else:
        _local.state.pop(provider, None)
