"""The sweeper: the database, not the queue, decides what still has to be delivered.

Huey has no acknowledgement: a task popped by a worker that then dies is
gone, and a Redis restarted empty forgets every queued task. So the
scheduler process periodically re-enqueues rows whose task may be lost
(DESIGN.md §2, at-least-once): ``sending`` whose lease expired (its worker
died: a live one renews it, see lease.py) goes back to ``queued``; ``queued``
past the tier's visibility timeout, in a tier whose queue lacks tasks, is
enqueued again; ``scheduled`` rows whose ``send_at`` has come are released
(a campaign's are the campaign tick's, ``campaigns/fanout.release_due``).
A task enqueued twice is harmless: only one worker wins the claim.

Each tier has its own timing: the high tier is swept every
``NOTIFY_HIGH_SWEEP_INTERVAL`` seconds (1 s) with a visibility timeout of
seconds, so an OTP held by a worker killed with ``kill -9`` reaches a
provider within seconds; the standard tier every ``NOTIFY_SWEEP_INTERVAL``.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from backend.notifications import actions
from backend.notifications.models import Notification, State
from backend.notifications.queues import HUEYS, TIERS
from backend.notifications.tasks import enqueue_delivery

BATCH = 1000


@dataclass(frozen=True)
class SweepReport:
    """How many rows each rule touched in one sweep."""

    stale_sending: int
    stale_queued: int
    due_scheduled: int


def _move(rows: list[tuple], from_state: str, reason: str, **filters) -> list:
    """Conditionally move rows, given as (id, tier), back to queued (due now); return the ids this sweep moved."""
    return [pk for pk, tier in rows if actions.release(pk, tier, from_state, reason, where=filters)]


def _enqueue(ids: list) -> None:
    tiers = dict(Notification.objects.filter(pk__in=ids).values_list("pk", "priority"))
    for pk in ids:
        enqueue_delivery(str(pk), tiers[pk])


def _tiers_missing_tasks(tiers: Iterable[str]) -> list[str]:
    """Of ``tiers``, those whose queue holds fewer tasks than they have queued rows: only there can a task be lost.

    A long backlog (a campaign draining) is queued past the visibility
    timeout by design; while its queue still holds a task for every row,
    re-enqueueing would only add duplicates for the workers to drop. Tasks
    scheduled for later (a notification waiting for an open breaker) count:
    with the high tier's timeout of seconds they would otherwise be copied
    every few seconds while they wait.
    """
    # A campaign's rows not yet handed over (queued_at NULL, campaigns/fanout.py) have no task by design.
    queued = dict(
        Notification.objects.filter(state=State.QUEUED, priority__in=tiers, queued_at__isnull=False)
        .order_by()
        .values_list("priority")
        .annotate(n=Count("pk"))
    )
    return [tier for tier, rows in queued.items() if HUEYS[tier].pending_count() + HUEYS[tier].scheduled_count() < rows]


def _visibility_timeout(tier: str) -> float:
    """Seconds a row of ``tier`` may stay queued with its task missing before it is enqueued again."""
    return settings.NOTIFY["HIGH_VISIBILITY_TIMEOUT" if tier == "high" else "VISIBILITY_TIMEOUT"]


def sweep(now: datetime | None = None, tiers: Iterable[str] = TIERS) -> SweepReport:
    """Run the three recovery rules once for the notifications of ``tiers``, at most ``BATCH`` rows each."""
    now = now or timezone.now()
    tiers = list(tiers)
    notifications = Notification.objects.order_by().filter(priority__in=tiers)
    # First, as it asks Redis: while Redis is down the sweep fails here, before it moved any row.
    missing = _tiers_missing_tasks(tiers)

    stale_sending = []
    # Claims taken before leases existed (migration 0007) have none: the old timeout rule still frees them.
    before_leases = now - timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"])
    legacy = {"lease_until__isnull": True, "sending_at__lt": before_leases}
    for expired in ({"lease_until__lt": now}, legacy):
        rows = list(notifications.filter(state=State.SENDING, **expired).values_list("pk", "priority")[:BATCH])
        stale_sending += _move(rows, State.SENDING, "lease-expired", **expired)

    stale_queued = []
    for tier in missing:
        cutoff = now - timedelta(seconds=_visibility_timeout(tier))
        # Oldest first, in the order of the queue's index: unordered, LIMIT looked cheapest as a seq scan that
        # stops at the BATCH-th match, and the matches, the last rows written, came after every other (121 ms
        # a sweep at 1,000,000 rows, each 10 s while a tier missed tasks).
        stale = notifications.filter(state=State.QUEUED, priority=tier, queued_at__lt=cutoff).order_by("queued_at")
        stale_queued += list(stale.values_list("pk", flat=True)[:BATCH])
    # Pushed forward so the next sweep leaves them alone for another timeout.
    Notification.objects.filter(pk__in=stale_queued, state=State.QUEUED).update(queued_at=now)

    # A campaign's scheduled rows are released by the campaign tick (campaigns/fanout.release_due), set-based
    # and paced by its feeder: enqueued here, a wave of a million rows would be a million tasks at once.
    scheduled = notifications.filter(state=State.SCHEDULED, send_at__lte=now, campaign__isnull=True)
    due_rows = list(scheduled.values_list("pk", "priority")[:BATCH])
    due = _move(due_rows, State.SCHEDULED, "send-at-reached", send_at__lte=now)

    _enqueue(stale_sending + stale_queued + due)
    return SweepReport(len(stale_sending), len(stale_queued), len(due))
