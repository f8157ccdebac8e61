"""A finished campaign's figures, frozen before retention deletes its notifications.

Retention (``backend/notifications/retention.py``) deletes notifications older than
``NOTIFY_RETENTION_DAYS``. A campaign's page, its API answer and its PDF report count its rows,
so before any of them goes ``freeze`` keeps what those readers show in ``Campaign.archive`` and
sets ``archived_at``: the counts per state (``ledger.counts``), the outcome per state, channel and
provider and the SMS cost (``report``), and a local-time campaign's waves (``ledger.waves``).
From then on each reader takes the archive, and the rows may be deleted. What needs the rows
themselves (the ledger's CSV, the recipients of a remainder or a correction) says they are gone.
"""

from dataclasses import astuple
from datetime import datetime
from typing import Any

from django.db import transaction

from campaigns import ledger, report, row_moves
from campaigns.actions import FINAL_STATES
from campaigns.fanout import UNFINISHED
from campaigns.models import Campaign, ScheduleMode


def figures(campaign: Campaign) -> dict[str, Any]:
    """What ``freeze`` keeps of ``campaign``, read from its rows: JSON-able lists and dicts (instants in ISO 8601)."""
    local_time = campaign.schedule_mode == ScheduleMode.LOCAL_TIME
    return {
        "counts": ledger.counts(campaign),
        "outcome": [astuple(row) for row in report.outcome_rows(campaign)],
        "sms_cost": [astuple(cost) for cost in report.sms_costs(campaign)],
        # Only the page of a local-time campaign shows waves; another's rows may each have their own instant.
        "waves": [[at.isoformat() if at else None, n] for at, n in ledger.waves(campaign)] if local_time else [],
    }


def freezable(ended_before: datetime) -> list[int]:
    """Ids of the campaigns ``freeze_finished(ended_before, …)`` would freeze now: done or cancelled before
    ``ended_before``, not frozen yet, with no row still queued, scheduled or sending."""
    candidates = Campaign.objects.filter(state__in=FINAL_STATES, updated_at__lt=ended_before, archived_at=None)
    return [pk for pk in candidates.order_by("pk").values_list("pk", flat=True) if not _unfinished(pk)]


def freeze_finished(ended_before: datetime, now: datetime) -> list[int]:
    """Freeze every campaign ``freezable(ended_before)`` names, at ``now``; the ids of those frozen.

    Each campaign is frozen in its own transaction with its row locked, so a remainder or correction
    being drafted from it at that moment (``actions``, which lock it too) reads its rows before they go.
    """
    frozen = []
    for pk in freezable(ended_before):
        with transaction.atomic():
            campaign = Campaign.objects.select_for_update().get(pk=pk)
            if campaign.archived_at or campaign.state not in FINAL_STATES or _unfinished(pk):
                continue
            # update(), not save(): updated_at is when the campaign ended, which retention compares.
            Campaign.objects.filter(pk=pk).update(archive=figures(campaign), archived_at=now)
            frozen.append(pk)
    return frozen


def _unfinished(campaign_id: int) -> bool:
    return row_moves.any_in(campaign_id, UNFINISHED)
