"""The sweeper: the database, not the queue, decides what still has to be delivered.

Huey has no acknowledgement: a task popped by a worker that then dies is
gone, and a Redis restarted empty forgets every queued task. So the
scheduler process periodically re-enqueues rows whose task may be lost
(DESIGN.md §2, at-least-once): ``sending`` past the visibility timeout (the
worker died mid-call) goes back to ``queued``; ``queued`` past the timeout is
enqueued again; ``scheduled`` rows whose ``send_at`` has come are released.
A task enqueued twice is harmless: only one worker wins the claim.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from backend.notifications import actions
from backend.notifications.models import Notification, State
from backend.notifications.queues import HUEYS
from backend.notifications.tasks import enqueue_delivery

BATCH = 1000


@dataclass(frozen=True)
class SweepReport:
    """How many rows each rule touched in one sweep."""

    stale_sending: int
    stale_queued: int
    due_scheduled: int


def _move(ids: list, from_state: str, reason: str, **filters) -> list:
    """Conditionally move rows back to queued (due now); return the ids this sweep moved."""
    return [pk for pk in ids if actions.release(pk, from_state, reason, where=filters)]


def _enqueue(ids: list) -> None:
    tiers = dict(Notification.objects.filter(pk__in=ids).values_list("pk", "priority"))
    for pk in ids:
        enqueue_delivery(str(pk), tiers[pk])


def _tiers_missing_tasks() -> list[str]:
    """Tiers whose queue holds fewer tasks than they have queued rows: only there can a task be lost.

    A long backlog (a campaign draining) is queued past the visibility
    timeout by design; while its queue still holds a task for every row,
    re-enqueueing would only add duplicates for the workers to drop.
    """
    queued = dict(
        Notification.objects.filter(state=State.QUEUED).order_by().values_list("priority").annotate(n=Count("pk"))
    )
    return [tier for tier, rows in queued.items() if HUEYS[tier].pending_count() < rows]


def sweep(now: datetime | None = None) -> SweepReport:
    """Run the three recovery rules once, at most ``BATCH`` rows each."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"])
    notifications = Notification.objects.order_by()
    # First, as it asks Redis: while Redis is down the sweep fails here, before it moved any row.
    missing = _tiers_missing_tasks()

    stale_sending_ids = list(
        notifications.filter(state=State.SENDING, sending_at__lt=cutoff).values_list("pk", flat=True)[:BATCH]
    )
    stale_sending = _move(stale_sending_ids, State.SENDING, "visibility-timeout", sending_at__lt=cutoff)

    stale_queued = []
    for tier in missing:
        stale_queued += list(
            notifications.filter(state=State.QUEUED, priority=tier, queued_at__lt=cutoff).values_list("pk", flat=True)[
                :BATCH
            ]
        )
    # Pushed forward so the next sweep leaves them alone for another timeout.
    Notification.objects.filter(pk__in=stale_queued, state=State.QUEUED).update(queued_at=now)

    due_ids = list(notifications.filter(state=State.SCHEDULED, send_at__lte=now).values_list("pk", flat=True)[:BATCH])
    due = _move(due_ids, State.SCHEDULED, "send-at-reached", send_at__lte=now)

    _enqueue(stale_sending + stale_queued + due)
    return SweepReport(len(stale_sending), len(stale_queued), len(due))
