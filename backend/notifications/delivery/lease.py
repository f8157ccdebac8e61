"""Leases: a claimed notification stays with its worker only while that worker is alive to say so.

A claim (state ``sending``) carries ``lease_until``: claim time + the tier's
lease (``NOTIFY_HIGH_LEASE`` / ``NOTIFY_STANDARD_LEASE`` seconds). Each
worker process runs one ``Heartbeat`` thread that renews, every third of the
lease, the leases of the notifications its threads are delivering, however
long a provider call takes. A process killed with ``kill -9`` renews nothing,
so its claims expire within one lease and the sweeper hands them out again;
a slow call of a live worker is never handed out twice. That decouples
recovery time from provider timeouts: a fixed visibility timeout has to be
longer than the slowest call (with failover, two calls) to be safe.
"""

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.utils import timezone

from backend.notifications.actions.transitions import unindexed
from backend.notifications.models import Notification, State

logger = logging.getLogger(__name__)

_held: dict[str, str] = {}  # notification id → tier, for this process
_lock = threading.Lock()


def expiry(tier: str, now: datetime | None = None) -> datetime:
    """When a claim of ``tier`` taken or renewed at ``now`` expires."""
    return (now or timezone.now()) + timedelta(seconds=settings.NOTIFY["LEASE"][tier])


@contextmanager
def held(notification: Notification) -> Iterator[None]:
    """Keep the notification's lease renewed by this process's heartbeat while the block runs."""
    key = str(notification.pk)
    with _lock:
        _held[key] = notification.priority
    try:
        yield
    finally:
        with _lock:
            _held.pop(key, None)


@contextmanager
def held_many(ids: list[str], tier: str) -> Iterator[None]:
    """``held`` for a claimed batch: every id's lease is renewed by this process's heartbeat while the block runs."""
    keys = [str(pk) for pk in ids]
    with _lock:
        _held.update(dict.fromkeys(keys, tier))
    try:
        yield
    finally:
        with _lock:
            for key in keys:
                _held.pop(key, None)


def renew(now: datetime | None = None) -> int:
    """Extend the lease of every notification this process holds that is still sending; returns the rows renewed.

    Rows another transaction has locked just now are skipped (``SKIP LOCKED``): they are being
    written by their own worker (a batch moving them to ``sent``), and the next beat renews them.
    Waiting for them instead deadlocked with a batch's UPDATE, which locks the same rows in
    another order, and PostgreSQL aborted one of the two (at load 10, a batch).
    """
    with _lock:
        by_tier: dict[str, list[str]] = {}
        for key, tier in _held.items():
            by_tier.setdefault(tier, []).append(key)
    renewed = 0
    for tier, ids in by_tier.items():
        with transaction.atomic():
            # By key, the state compared unindexed: with statistics taken while nothing was in flight, PostgreSQL read
            # every sending row through the leases' index and filtered it by id (5,000 rows in flight: all read).
            rows = Notification.objects.alias(state_code=unindexed("state"))
            free = rows.filter(pk__in=ids, state_code=State.SENDING).order_by().select_for_update(skip_locked=True)
            renewed += Notification.objects.filter(pk__in=free.values("pk")).update(lease_until=expiry(tier, now))
    return renewed


class Heartbeat(threading.Thread):
    """Renews this process's leases every third of ``tier``'s lease, until the process ends (a daemon thread)."""

    def __init__(self, tier: str):
        super().__init__(name=f"lease-heartbeat-{tier}", daemon=True)
        self.interval = settings.NOTIFY["LEASE"][tier] / 3

    def run(self) -> None:
        while True:
            time.sleep(self.interval)
            try:
                renew()
            except Exception:
                # A missed renewal costs nothing while the next one comes within the lease.
                logger.exception("lease renewal failed")
            finally:
                close_old_connections()
