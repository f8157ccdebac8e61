"""How a running campaign goes, for its page: the pace (sent per minute over the last hour), the expected end,
and why it waits when it waits.

``why_waiting`` is pure — ``Facts`` in, ``Reason`` rows out — so every reason is tested from a
table (tests/test_campaign_pace.py); ``facts`` reads them: one ``GROUP BY reason`` over the
campaign's scheduled rows and one statement counting its queued ones (all, fed) on the (campaign,
state) index, then the standard queue's depth and the circuit breaker of each provider of its channel
(Redis). The pace is one ``GROUP BY`` minute over the rows sent in the last hour, on the
(campaign, sent_at) index of sent rows.

The reasons a campaign's rows wait (``Notification.reason`` of its ``scheduled`` rows):
``campaign-wave`` (a local-time wave), ``quiet-hours`` (the recipient's), ``sending-hours`` and
``campaign-spread`` (the campaign's sending hours and its spread over a window, campaigns/pacing.py).
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db.models import Count, Max, Min, Q, Subquery
from django.db.models.functions import Coalesce, TruncMinute

from backend.notifications.delivery import breaker
from backend.notifications.delivery.shared_state import RedisUnavailable, guard
from backend.notifications.models import Notification, Priority, State
from backend.notifications.providers.base import providers_for_channel
from backend.notifications.providers.config import ProvidersFileError
from backend.notifications.queues import HUEYS
from campaigns.models import Campaign, CampaignAudit
from campaigns.pacing import rate_words

# Minutes of the pace plot, and of the recent pace the expected end is worked out from.
PLOT_MINUTES = 60
RECENT_MINUTES = 5
# Why a scheduled row waits, as a person reads it: {n} rows, {at} the first of them goes.
SCHEDULED_REASONS = {
    "campaign-wave": "{n} wait for their local-time wave; the next goes at {at}.",
    "quiet-hours": "{n} wait for the end of their recipients' quiet hours; the first at {at}.",
    "sending-hours": "{n} wait for the campaign's sending hours in their zone; the first goes at {at}.",
    "campaign-spread": "{n} are spread over the campaign's window; the next goes at {at}.",
}


@dataclass(frozen=True)
class Minute:
    """One minute of the plot: when it starts (UTC), how many of the campaign's rows were sent in it, the first when.

    ``since_resume``: how many of them were sent at or after its last resume (``minutes_sent``'s ``resumed``).
    """

    at: datetime
    sent: int
    first: datetime | None = None
    since_resume: int = 0


@dataclass(frozen=True)
class Pace:
    """The last ``PLOT_MINUTES`` minutes, oldest first; the recent pace (sent per minute); the expected end (UTC).

    ``expected_end`` is None when nothing was sent recently, nothing is left, or the campaign is paused.
    """

    minutes: list[Minute]
    per_minute: float
    expected_end: datetime | None


def minutes_sent(campaign: Campaign, now: datetime, resumed: datetime | None = None) -> list[Minute]:
    """Rows of ``campaign`` sent in each of the last ``PLOT_MINUTES`` minutes to ``now``, oldest first, zeros too.

    With ``resumed`` (its last resume), each minute also counts its rows sent since then, in the same statement.
    """
    last = now.astimezone(UTC).replace(second=0, microsecond=0)
    first = last - timedelta(minutes=PLOT_MINUTES - 1)
    rows = (
        Notification.objects.filter(campaign=campaign, sent_at__gte=first)
        .annotate(minute=TruncMinute("sent_at"))
        .order_by()
        .values_list("minute")
        # not COUNT(id): with no column of the heap to read (sent_at is in the index), an index-only scan
        .annotate(
            n=Count("*"),
            first=Min("sent_at"),
            since=Count("sent_at", filter=Q(sent_at__gte=resumed)) if resumed else Count(None),  # COUNT(NULL): 0
        )
    )
    found = {minute.astimezone(UTC): (n, earliest, since) for minute, n, earliest, since in rows}
    plot = (first + timedelta(minutes=k) for k in range(PLOT_MINUTES))
    return [Minute(at, *found.get(at, (0, None, 0))) for at in plot]


def resumed_at(audit: Iterable[CampaignAudit]) -> datetime | None:
    """When the campaign was last resumed, from its ``audit`` rows oldest first; None if never or paused since."""
    last = None
    for row in audit:
        if row.action in (CampaignAudit.Action.PAUSE, CampaignAudit.Action.RESUME):
            last = row
    return last.at if last is not None and last.action == CampaignAudit.Action.RESUME else None


def recent_per_minute(minutes: list[Minute], now: datetime, resumed: datetime | None = None) -> float:
    """Sent per minute over the last ``RECENT_MINUTES`` minutes, counted from the first of them that sent anything.

    A campaign that began sending 30 s ago is measured over those 30 s (at least one minute's worth
    of time is never assumed: 30 s count as half a minute), not over five minutes it did not run.
    When the minute before the first busy one sent nothing, sending began inside it: counted from
    its first send, not from the minute's start, which read 600 an hour begun at :15 s as 4 a minute
    after 30 s. A single send so far still counts from the minute's start (1 in 1 s is no pace of 60).

    Resumed (``resumed``) inside those minutes, it counts only the rows sent since the resume over the time since:
    the paused minutes read 10 a minute resumed 30 s ago as 6.7 a minute, and its expected end 20 minutes late.
    """
    window = minutes[-RECENT_MINUTES:]
    if resumed is not None and window and resumed > window[0].at:
        elapsed = (now - resumed).total_seconds() / 60
        return sum(minute.since_resume for minute in window) / max(elapsed, 1 / 60)
    busy = [k for k in range(max(0, len(minutes) - RECENT_MINUTES), len(minutes)) if minutes[k].sent]
    if not busy:
        return 0.0
    sent = sum(minutes[k].sent for k in busy)
    start = minutes[busy[0]]
    began_inside = start.first is not None and (busy[0] == 0 or not minutes[busy[0] - 1].sent)
    if began_inside and sent > 1 and now > start.first:
        return sent / ((now - start.first).total_seconds() / 60)
    elapsed = (now - start.at).total_seconds() / 60
    return sent / max(elapsed, 1 / 60)


def pace(
    campaign: Campaign,
    remaining: int,
    now: datetime,
    not_before: datetime | None = None,
    resumed: datetime | None = None,
) -> Pace:
    """``campaign``'s pace at ``now``, and when the ``remaining`` rows are expected to be sent.

    ``resumed``: its last resume (``resumed_at``), from which the recent pace counts when it is recent.

    At the recent pace, but never before ``not_before`` (``earliest_end``: the latest ``send_at``
    of its rows waiting for their place in the spread, the sending hours, a wave, and the time its
    rate needs for them): 120 rows at 5 a minute are not through in 24 minutes when 90 of them wait for 08:00.
    """
    minutes = minutes_sent(campaign, now, resumed)
    per_minute = recent_per_minute(minutes, now, resumed)
    if campaign.state != Campaign.State.RUNNING or remaining <= 0:
        return Pace(minutes, per_minute, None)
    ends = [now + timedelta(minutes=remaining / per_minute)] if per_minute > 0 else []
    ends += [not_before] if not_before is not None else []
    return Pace(minutes, per_minute, max(ends, default=None))


# --- why it waits -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What decides why a campaign waits, read at one instant (``facts``).

    ``scheduled``: reason → (rows, the earliest ``send_at``); ``unfed``: rows queued and not yet
    handed to the standard queue; ``queue_depth``: tasks in that queue (None: Redis unreachable)
    and ``queue_limit`` the feeder's ceiling (``NOTIFY_CAMPAIGN_FEED``); ``rate_per_second``: the
    campaign's own rate, if it has one; ``open_breakers``: providers of its channel whose breaker
    is open; ``last_scheduled``: the latest ``send_at`` of its scheduled rows (``earliest_end``'s floor).
    """

    state: str
    paused_at: datetime | None = None
    paused_by: str = ""
    scheduled: dict[str, tuple[int, datetime | None]] | None = None
    unfed: int = 0
    queue_depth: int | None = 0
    queue_limit: int = 0
    rate_per_second: float | None = None
    open_breakers: tuple[str, ...] = ()
    last_scheduled: datetime | None = None


def earliest_end(facts: Facts, now: datetime) -> datetime | None:
    """The earliest instant all the campaign's waiting rows can be sent; None when nothing bounds it.

    Never before the last ``send_at`` of its scheduled rows; with a rate of its own, the rows ready
    now go first at that rate, then each reason's rows from its first ``send_at`` (none goes before
    it), one after the other: 200 released at 09:00 at 600 an hour end at 09:20 (as the pre-flight's
    ``pacing.expected_pace`` says), not at 09:00. A floor: rows of one reason spread over a long
    stretch may end later.
    """
    ends = [facts.last_scheduled] if facts.last_scheduled is not None else []
    if facts.rate_per_second:
        through = now + timedelta(seconds=facts.unfed / facts.rate_per_second)
        for first, n in sorted((at or now, n) for n, at in (facts.scheduled or {}).values()):
            through = max(through, first) + timedelta(seconds=n / facts.rate_per_second)
        ends.append(through)
    return max(ends, default=None)


@dataclass(frozen=True)
class Reason:
    """One reason a campaign waits: ``code`` (stable, for tests and styling) and ``text`` (for a person)."""

    code: str
    text: str


def _clock(at: datetime | None) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if at else "an unknown time"


def why_waiting(facts: Facts) -> list[Reason]:
    """Why a running or paused campaign hands nothing, or less than it could, over now; empty when it does not wait.

    In the order they hold it back: paused; then, for rows ready to go, a provider's open
    breaker, the standard queue full (the tier's budget), the campaign's own rate; then the
    rows scheduled for later, per reason (``SCHEDULED_REASONS``).
    """
    if facts.state not in (Campaign.State.RUNNING, Campaign.State.PAUSED):
        return []
    reasons = []
    if facts.state == Campaign.State.PAUSED:
        by = f" by {facts.paused_by}" if facts.paused_by else ""
        reasons.append(
            Reason("paused", f"Paused{by} at {_clock(facts.paused_at)}: nothing is handed to a provider until resumed.")
        )
    elif facts.unfed:
        reasons += _ready_but_held(facts)
    for code, (n, at) in sorted((facts.scheduled or {}).items()):
        if code in SCHEDULED_REASONS:
            reasons.append(Reason(code, SCHEDULED_REASONS[code].format(n=f"{n:,}", at=_clock(at))))
    return reasons


def _ready_but_held(facts: Facts) -> list[Reason]:
    """Why rows ready to go (queued, not yet fed) are not all handed over at once."""
    held = []
    if facts.open_breakers:
        names = ", ".join(facts.open_breakers)
        held.append(Reason("breaker-open", f"The circuit breaker of {names} is open: sending waits for it to close."))
    if facts.queue_depth is not None and facts.queue_depth >= facts.queue_limit:
        held.append(
            Reason(
                "budget",
                f"The standard queue is full ({facts.queue_depth:,} tasks, at most {facts.queue_limit:,} fed): "
                f"{facts.unfed:,} wait for the providers' budget.",
            )
        )
    elif facts.rate_per_second:
        held.append(
            Reason("rate", f"Held to its rate of {rate_words(facts.rate_per_second)}: {facts.unfed:,} wait their turn.")
        )
    return held


def facts(campaign: Campaign) -> Facts:
    """The ``Facts`` of ``campaign`` now (PostgreSQL, then Redis; Redis unreachable leaves its facts out)."""
    rows = Notification.objects.filter(campaign=campaign).order_by()
    waiting = (
        rows.filter(state=State.SCHEDULED)
        .values_list("reason")
        .annotate(n=Count("pk"), at=Min("send_at"), last=Max("send_at"))
    )
    groups = list(waiting)
    scheduled = {reason: (n, at) for reason, n, at, _ in groups}
    last = max((latest for *_, latest in groups if latest is not None), default=None)
    # Queued minus fed, not a count of the unfed: those are most of a big campaign (200,000 rows read at each
    # poll, 366 ms with its scheduled ones), the fed ones at most the queue's room (the sweeper's state index).
    # Both counts in one statement, each its own scalar subquery on its own index.
    queued = rows.filter(state=State.QUEUED)
    counts = Campaign.objects.filter(pk=campaign.pk).values_list(
        _count(queued), _count(queued.filter(queued_at__isnull=False))
    )
    total, fed = counts.get()
    unfed = total - fed
    paused_by = ""
    if campaign.state == Campaign.State.PAUSED:
        audit = campaign.audit.filter(action=CampaignAudit.Action.PAUSE).order_by("-at", "-pk").first()
        paused_by = audit.actor_name if audit else ""
    depth, open_breakers = _redis_facts(campaign.channel) if unfed else (0, ())
    return Facts(
        state=campaign.state, paused_at=campaign.paused_at, paused_by=paused_by, scheduled=scheduled, unfed=unfed,
        queue_depth=depth, queue_limit=settings.NOTIFY["CAMPAIGN_FEED"],
        rate_per_second=campaign.rate_per_second, open_breakers=open_breakers,
        last_scheduled=last,
    )  # fmt: skip


def _count(rows) -> Subquery:
    """``SELECT count(*)`` of ``rows`` as a scalar subquery (0 when none)."""
    return Coalesce(Subquery(rows.values("campaign").annotate(n=Count("*")).values("n")), 0)


def _redis_facts(channel: str) -> tuple[int | None, tuple[str, ...]]:
    """The standard queue's depth and the open breakers of ``channel``'s providers; (None, ()) without Redis."""
    try:
        names = [provider.name for provider in providers_for_channel(channel)]
    except ProvidersFileError:
        names = []
    try:
        with guard("why a campaign waits"):
            depth = HUEYS[Priority.STANDARD].pending_count()
            return depth, tuple(name for name in names if breaker.state(name) == breaker.OPEN)
    except RedisUnavailable:
        return None, ()
