"""Sliding-window limits shared by every web process: per user and category, per phone number, per country.

Each limit is a sorted set of event times in Redis (a sliding log): an event
is counted only if every window it belongs to has room, and then in all of
them at once (one Lua script, atomic). Without Redis (the embedded default)
the same rule runs in this process. Times are seconds since the epoch.

When Redis is unreachable ``hit`` and ``count`` raise
``shared_state.RedisUnavailable``:
whether a limit then fails open or closed is the caller's decision (policy.py).

An allowed verdict carries the ``Event`` it counted, so that a caller whose send turns out to be
a duplicate after all (its idempotency key taken at the INSERT) can ``forget`` it again.
"""

import threading
import time
import uuid
from dataclasses import dataclass

from backend.notifications.delivery.shared_state import guard, redis_client

# Counts one event (``member`` at ``now``) in the windows KEYS[first .. first + count - 1], whose seconds
# and limits are ARGV[at], ARGV[at + 1], ... in pairs, if all have room; else returns the refusing
# window's position (1-based) and its oldest event.
_HIT_WINDOWS = """
local function hit(first, count, at, now, member)
  for i = 0, count - 1 do
    local key, window, limit = KEYS[first + i], tonumber(ARGV[at + 2 * i]), tonumber(ARGV[at + 2 * i + 1])
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
    if redis.call('ZCARD', key) >= limit then
      local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      return i + 1, oldest[2]
    end
  end
  for i = 0, count - 1 do
    redis.call('ZADD', KEYS[first + i], now, member)
    redis.call('EXPIRE', KEYS[first + i], math.ceil(tonumber(ARGV[at + 2 * i])) + 1)
  end
  return 0, '0'
end
"""
# ARGV: now, the windows' (seconds, limit) pairs, the event's member.
_HIT = (
    _HIT_WINDOWS
    + """
local refused, oldest = hit(1, #KEYS, 2, tonumber(ARGV[1]), ARGV[#ARGV])
return {refused, oldest}
"""
)
# ARGV: now, then per event: its number of windows n, their n (seconds, limit) pairs, its member;
# KEYS: the events' windows one after the other. Returns (refused, oldest) per event, flat.
_HIT_MANY = (
    _HIT_WINDOWS
    + """
local now, first, at, out = tonumber(ARGV[1]), 1, 2, {}
while at <= #ARGV do
  local count = tonumber(ARGV[at])
  local refused, oldest = hit(first, count, at + 1, now, ARGV[at + 1 + 2 * count])
  out[#out + 1] = refused
  out[#out + 1] = oldest
  first, at = first + count, at + 2 + 2 * count
end
return out
"""
)


@dataclass(frozen=True)
class Window:
    """At most ``limit`` events per ``seconds``, counted under ``key``."""

    key: str
    seconds: float
    limit: int


@dataclass(frozen=True)
class Event:
    """One event as counted: its ``member`` (unique) at ``at`` (epoch seconds) under each of ``keys``."""

    keys: tuple[str, ...]
    member: str
    at: float

    @classmethod
    def of(cls, windows: list[Window], member: str, at: float) -> "Event":
        """The event counted as ``member`` at ``at`` in every one of ``windows``."""
        return cls(tuple(window.key for window in windows), member, at)


@dataclass(frozen=True)
class Verdict:
    """``allowed``, or the window that refused and when it has room again (epoch seconds).

    ``counted`` is the event an allowed ``hit`` counted (None when there was nothing to count).
    """

    allowed: bool
    refused_by: Window | None = None
    reopens_at: float | None = None
    counted: Event | None = None


_lock = threading.Lock()
# Per key, the (time, member) of each event in its window.
_local: dict[str, list[tuple[float, str]]] = {}


def _hit_local(windows: list[Window], now: float) -> Verdict:
    member = uuid.uuid4().hex
    with _lock:
        for window in windows:
            events = [event for event in _local.get(window.key, []) if event[0] > now - window.seconds]
            _local[window.key] = events
            if len(events) >= window.limit:
                return Verdict(False, window, min(t for t, _ in events) + window.seconds)
        for window in windows:
            _local[window.key].append((now, member))
    return Verdict(True, counted=Event.of(windows, member, now))


def hit(windows: list[Window], now: float | None = None) -> Verdict:
    """Count one event in every window if all have room; else count nothing and say which refused.

    Raises ``RedisUnavailable`` when the shared windows cannot be read.
    """
    windows = [w for w in windows if w.limit > 0]
    if not windows:
        return Verdict(True)
    now = time.time() if now is None else now
    client = redis_client()
    if client is None:
        return _hit_local(windows, now)
    args: list = [now]
    for window in windows:
        args += [window.seconds, window.limit]
    member = uuid.uuid4().hex
    with guard("rate limit"):
        # EVALSHA: the script's text crosses the wire once per connection, not on every send.
        script = client.register_script(_HIT)
        refused, oldest = script(keys=[w.key for w in windows], args=[*args, member])
    if not refused:
        return Verdict(True, counted=Event.of(windows, member, now))
    window = windows[int(refused) - 1]
    return Verdict(False, window, float(oldest) + window.seconds)


def hit_many(requests: list[list[Window]], now: float | None = None) -> list[Verdict]:
    """``hit`` for each list of windows, in order, in one Redis call (one script over all of them).

    The script counts the events one after the other, atomically, so the verdicts are those of as
    many ``hit`` calls in a row. One call, not a pipeline of one script per event: redis-py packed
    each of those in Python, about 30 µs apiece (README "Throughput: the send API"). Raises
    ``RedisUnavailable`` when the shared windows cannot be read.
    """
    now = time.time() if now is None else now
    requests = [[w for w in windows if w.limit > 0] for windows in requests]
    client = redis_client()
    if client is None:
        return [_hit_local(windows, now) if windows else Verdict(True) for windows in requests]
    counted = [windows for windows in requests if windows]
    members = [uuid.uuid4().hex for _ in counted]
    answers = iter(_hit_all(client, counted, members, now) if counted else [])
    each_member = iter(members)
    verdicts = []
    for windows in requests:
        if not windows:
            verdicts.append(Verdict(True))
            continue
        refused, oldest, member = next(answers), next(answers), next(each_member)
        if refused:
            window = windows[int(refused) - 1]
            verdicts.append(Verdict(False, window, float(oldest) + window.seconds))
        else:
            verdicts.append(Verdict(True, counted=Event.of(windows, member, now)))
    return verdicts


def _hit_all(client, requests: list[list[Window]], members: list[str], now: float) -> list:
    """The flat (refused, oldest) answers of ``_HIT_MANY`` for non-empty ``requests``, each counted as its member."""
    keys: list[str] = []
    args: list = [now]
    for windows, member in zip(requests, members, strict=True):
        keys += [w.key for w in windows]
        args += [len(windows), *[value for w in windows for value in (w.seconds, w.limit)], member]
    with guard("rate limit"):
        return client.register_script(_HIT_MANY)(keys=keys, args=args)


def forget(events: list[Event]) -> None:
    """Uncount ``events`` from every window they were counted in (one Redis round trip).

    For an event whose send did not happen after all: a duplicate found only at the INSERT
    (``actions.accept``). An event already gone from its window (expired) is nothing to remove.
    Raises ``RedisUnavailable`` when the shared windows cannot be reached.
    """
    if not events:
        return
    client = redis_client()
    if client is None:
        with _lock:
            for event in events:
                for key in event.keys:
                    _local[key] = [kept for kept in _local.get(key, []) if kept[1] != event.member]
        return
    with guard("rate limit"):
        pipe = client.pipeline(transaction=False)
        for event in events:
            for key in event.keys:
                pipe.zrem(key, event.member)
        pipe.execute()


def count(key: str, seconds: float, now: float | None = None) -> int:
    """Events under ``key`` in the last ``seconds`` (read only); raises ``RedisUnavailable``."""
    now = time.time() if now is None else now
    client = redis_client()
    if client is None:
        with _lock:
            return sum(1 for t, _ in _local.get(key, []) if t > now - seconds)
    with guard("rate count"):
        return client.zcount(key, now - seconds, "+inf")


def reset_local() -> None:
    """Forget the in-process windows (tests of the embedded default)."""
    with _lock:
        _local.clear()
