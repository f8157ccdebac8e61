"""The sent-marker: proof, outside the database, that a provider accepted a notification.

DESIGN.md §2: the worker checks it *before* calling a provider and writes it
only *after* the provider accepted. A worker that dies between the
provider's acceptance and the status write leaves the row in ``sending``; the
retry finds the marker and records ``sent`` without a second call. Claiming
the key before sending would instead turn at-least-once into at-most-once.
"""

import threading
import time

from django.conf import settings

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client

_local: dict[str, tuple[float, str]] = {}

# SET KEYS[i] to ARGV[i + 1] with a TTL of ARGV[1] seconds: a batch's markers in one command.
_PUT_MANY = """
for i, key in ipairs(KEYS) do redis.call('SET', key, ARGV[i + 1], 'EX', ARGV[1]) end
"""
_lock = threading.Lock()


def _key(notification_id: str) -> str:
    return f"sent:{notification_id}"


def get(notification_id: str) -> tuple[str, str] | None:
    """``(provider, provider_ref)`` when a provider already accepted this notification, else None."""
    client = redis_client()
    if client:
        value = client.get(_key(notification_id))
    else:
        with _lock:
            expires, value = _local.get(notification_id, (0.0, None))
            value = value if expires > time.monotonic() else None
    if not value:
        return None
    provider, _, reference = value.partition("|")
    return provider, reference


def put_many(accepted: dict[str, tuple[str, str]]) -> None:
    """``put`` for a batch: ``{notification id: (provider, reference)}`` in one Lua call, same TTL and rules."""
    if not accepted:
        return
    ttl = settings.NOTIFY["SENT_MARKER_TTL"]
    client = redis_client()
    if client:
        try:
            with guard("sent-marker"):
                keys = [_key(notification_id) for notification_id in accepted]
                values = [f"{provider}|{reference}" for provider, reference in accepted.values()]
                client.eval(_PUT_MANY, len(keys), *keys, ttl, *values)
        except RedisUnavailable:
            pass
        return
    with _lock:
        expires = time.monotonic() + ttl
        for notification_id, (provider, reference) in accepted.items():
            _local[notification_id] = (expires, f"{provider}|{reference}")


def put(notification_id: str, provider: str, reference: str) -> None:
    """Record that ``provider`` accepted the notification as ``reference`` (TTL ``SENT_MARKER_TTL`` s).

    Without Redis the marker is skipped: the status write that follows must still happen (failing
    here would leave the row in ``sending`` and send it again); only a worker dying before that
    write could then send twice.
    """
    ttl = settings.NOTIFY["SENT_MARKER_TTL"]
    value = f"{provider}|{reference}"
    client = redis_client()
    if client:
        try:
            with guard("sent-marker"):
                client.set(_key(notification_id), value, ex=ttl)
        except RedisUnavailable:
            pass
    else:
        with _lock:
            _local[notification_id] = (time.monotonic() + ttl, value)
