"""What a campaign's notifications became: counts per state, the exact split of a cancel, its rows for download.

Every figure comes from one ``GROUP BY state`` on the (campaign, state) index
(``notification_campaign_idx``), never from a Python loop over rows, so it stays cheap at
a million recipients.

The split of a cancel is exact without keeping the ids of the rows in flight: ``cancel``
(``stop_unsent``) turns every row not yet handed to a provider (``queued``, ``scheduled``)
into ``cancelled`` in the transaction that records the per-state counts at that instant
in the audit row (``CampaignAudit.detail["counts"]``). After it, only the rows that were
``sending`` can still change state, so today's counts minus those at the cancel say what
became of them (sent, failed, expired…). ``sent`` is always "handed to a provider and
accepted": the figure a provider's own record must match.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Count

from backend.notifications.models import Notification, State
from campaigns import row_moves
from campaigns.models import Campaign, CampaignAudit, Segment, SegmentMember
from campaigns.row_moves import UNSENT

CANCEL_REASON = "campaign-cancelled"
# What became of the rows in flight at a cancel, in the order a person reads it.
IN_FLIGHT_OUTCOMES = (State.SENT, State.FAILED, State.EXPIRED, State.CANCELLED)
CSV_COLUMNS = ("user_id", "address", "state", "reason", "provider", "sent_at")
# Accepted by a provider: still "sent", or moved on by its delivery receipt (receipts/apply.py).
HANDED_OVER = (State.SENT, State.DELIVERED, State.UNDELIVERED)
# Reached the person, or may have: who a correction goes to.
REACHED = (State.SENT, State.DELIVERED)
# Send instants a campaign's page lists as waves at most: one a UTC offset (about 40 in use), with room for
# the ends of quiet hours and sending hours.
MAX_WAVES = 200


def handed_over(counts: dict[str, int]) -> int:
    """How many of ``counts`` a provider accepted, whatever their receipts said since."""
    return sum(counts.get(state, 0) for state in HANDED_OVER)


def counts(campaign: Campaign) -> dict[str, int]:
    """Notifications of ``campaign`` per state, every state named (0 when none): one GROUP BY on the index.

    A cancelled campaign's rows still ``queued`` or ``scheduled`` are counted ``cancelled``: the
    cancel stopped them (nothing feeds, releases or retries a cancelled campaign's rows) and the
    scheduler only writes their new state in chunks after it (``fanout.stop_cancelled``).
    """
    if campaign.archived_at:
        # Frozen before retention deleted the rows (campaigns/archive.py), already as a cancel counts them.
        frozen = campaign.archive.get("counts", {})
        return {state: int(frozen.get(state, 0)) for state in State.values}
    found = dict(Notification.objects.filter(campaign=campaign).order_by().values_list("state").annotate(n=Count("pk")))
    result = {state: found.get(state, 0) for state in State.values}
    if campaign.state == Campaign.State.CANCELLED:
        result = as_cancelled(result)
    return result


def waves(campaign: Campaign) -> list[tuple[datetime | None, dict[str, int]]]:
    """``campaign``'s rows per send instant and state (one GROUP BY), by instant; rows without one last.

    Empty when the instants are not waves: a spread gives each row its own (``pacing``), and more
    than ``MAX_WAVES`` instants (users' own quiet hours, say) would be a table nobody reads, rebuilt
    at every poll of the page. Once archived (``campaigns/archive.py``), the waves frozen then.
    """
    if campaign.archived_at:
        return [(datetime.fromisoformat(at) if at else None, n) for at, n in campaign.archive.get("waves", [])]
    if campaign.spread_seconds or campaign.spread_until:
        return []
    grouped: dict[datetime | None, dict[str, int]] = {}
    rows = Notification.objects.filter(campaign=campaign).order_by().values_list("send_at", "state")
    for at, state, n in rows.annotate(n=Count("pk")):
        grouped.setdefault(at, {})[state] = n
    if len(grouped) > MAX_WAVES:
        return []
    return sorted(grouped.items(), key=lambda item: (item[0] is None, item[0]))


def as_cancelled(counts: dict[str, int]) -> dict[str, int]:
    """``counts`` with the rows not yet handed over (``UNSENT``) moved to ``cancelled``."""
    pending = sum(counts[state] for state in UNSENT)
    return {**counts, **dict.fromkeys(UNSENT, 0), State.CANCELLED: counts[State.CANCELLED] + pending}


def stop_unsent(campaign: Campaign, at: datetime, *, fed_only: bool = False, limit: int | None = None) -> int:
    """Cancel rows of ``campaign`` not yet handed to a provider (reason ``campaign-cancelled``), with history; how many.

    ``fed_only``: only the rows a worker could claim (a task in Redis), which ``actions.cancel``
    stops in its own transaction, in a fraction of a second however big the campaign.
    ``limit``: at most that many rows (the chunks the scheduler writes after the cancel,
    ``fanout.stop_cancelled``). The move and what a worker's claim meets: ``row_moves``.
    """
    return row_moves.stop_unsent(campaign.pk, State.CANCELLED, CANCEL_REASON, at, fed_only=fed_only, limit=limit)


@dataclass(frozen=True)
class CancelSplit:
    """The exact ledger of a cancelled campaign.

    ``sent``: handed to a provider and accepted, now (before the cancel and by rows in flight
    then). ``cancelled``: stopped by the cancel. ``in_flight``: ``sending`` at the cancel, and
    ``in_flight_outcome`` what became of them (``sent``, ``failed``, ``expired``, ``cancelled``,
    and ``still_in_flight``: sending, or queued for a retry).
    """

    cancelled_at: datetime
    cancelled_by: str
    sent_at_cancel: int
    sent: int
    cancelled: int
    in_flight: int
    in_flight_outcome: dict[str, int]


@dataclass(frozen=True)
class Ledger:
    """A campaign's notifications per state (``counts``) and, once cancelled, the split of the cancel."""

    counts: dict[str, int]
    cancel: CancelSplit | None

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def ledger(campaign: Campaign, now_counts: dict[str, int] | None = None) -> Ledger:
    """``campaign``'s ledger; ``now_counts`` when the caller already counted (``counts``).

    Two queries at most: the counts and the cancel's audit row.
    """
    now = now_counts if now_counts is not None else counts(campaign)
    if campaign.state != Campaign.State.CANCELLED:
        return Ledger(now, None)
    audit = CampaignAudit.objects.filter(campaign=campaign, action=CampaignAudit.Action.CANCEL).order_by("-at").first()
    return Ledger(now, _split(campaign, audit, now) if audit else None)


def _split(campaign: Campaign, audit: CampaignAudit, now: dict[str, int]) -> CancelSplit:
    then = {state: audit.detail.get("counts", {}).get(state, 0) for state in State.values}
    in_flight = then[State.SENDING]
    outcome = {state: now[state] - then[state] for state in IN_FLIGHT_OUTCOMES}
    outcome[State.SENT] = handed_over(now) - handed_over(then)
    outcome["still_in_flight"] = in_flight - sum(outcome.values())
    return CancelSplit(
        cancelled_at=campaign.cancelled_at or audit.at,
        cancelled_by=audit.actor_name,
        sent_at_cancel=handed_over(then),
        sent=handed_over(now),
        cancelled=then[State.CANCELLED],
        in_flight=in_flight,
        in_flight_outcome=outcome,
    )


def as_dict(split: CancelSplit | None) -> dict[str, Any] | None:
    """The split as JSON-able data (the API's ``ledger``); None when the campaign was not cancelled."""
    if split is None:
        return None
    return {
        "cancelled_at": split.cancelled_at,
        "cancelled_by": split.cancelled_by,
        "sent": split.sent,
        "sent_at_cancel": split.sent_at_cancel,
        "cancelled": split.cancelled,
        "in_flight_at_cancel": split.in_flight,
        "in_flight_outcome": split.in_flight_outcome,
    }


def rows(campaign: Campaign, after: str = "", limit: int = 5000) -> list[tuple]:
    """The next ``limit`` rows of ``campaign`` after idempotency key ``after``, in key (user id) order.

    Each row: (idempotency key, user id, phone, email, state, reason, provider, sent_at); the
    caller masks the contacts. Keyset pages on the UNIQUE (scope, key) index, so the millionth
    row costs what the first did. Raw contacts never leave the view that masks them.
    """
    scope = f"campaign:{campaign.pk}"
    return list(
        Notification.objects.filter(idempotency_scope=scope, idempotency_key__gt=after)
        .order_by("idempotency_key")
        .values_list(
            "idempotency_key", "recipient__user_id", "recipient__phone", "recipient__email", "state", "reason",
            "provider", "sent_at",
        )[:limit]
    )  # fmt: skip


def copy_recipients(campaign: Campaign, states: tuple[str, ...], segment: Segment) -> int:
    """Make the recipients whose notification of ``campaign`` is in one of ``states`` members of ``segment``; how many.

    One INSERT … SELECT on the (campaign, state) index: a remainder of a million is no Python loop.
    """
    member, notification = SegmentMember._meta.db_table, Notification._meta.db_table
    placeholders = ", ".join("%s" for _ in states)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {member} (segment_id, recipient_id)"
            f" SELECT %s, recipient_id FROM {notification} WHERE campaign_id = %s AND state IN ({placeholders})",
            [segment.pk, campaign.pk, *states],
        )
        return cursor.rowcount
