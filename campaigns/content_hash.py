"""The SHA-256 an approval binds to: everything that decides what a campaign sends, to whom and when.

The canonical content is one JSON object (sorted keys, no spaces, ASCII-escaped, so any
text has exactly one encoding)::

    {"v": 1,
     "kind": <kind id>, "channel": "email",
     "templates": {"<language>": [<version id>, "<version content_hash>"], ...},
     "params": {...},
     "segment": {"id": 7, "kind": "list", "definition": {...}, "size": 2, "members": "<sha256 of user ids>"},
     "schedule": {"mode": "at", "send_at": "2026-12-01T09:00:00Z", "local_time": null},
     "end_at": "2026-12-02T09:00:00Z" | null,
     "correction": {"version": [<id>, "<content_hash>"]} | {"none_reason": "..."},
     "pacing": {"spread_seconds": 36000, "spread_until": "…Z", "rate_per_second": 50.0,
                "sending_hours": ["09:00:00", "20:00:00"]}}

``pacing`` (``campaigns/pacing.py``) holds only the pacing fields that are set, and is absent when
none is: the hash of a campaign approved before pacing existed stays what it was.

Template versions are immutable and carry their own content hash (``TemplateVersion.content_hash``),
so naming both binds the words. The segment's members enter as their count and a digest
(``audience.py``): a member added after submit changes the hash. The name is not part of it:
it decides nothing that goes out. Changing this format voids every stored hash: bump ``"v"``.
"""

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from backend.notifications.models import TemplateVersion
from campaigns.audience import Audience, AudienceUnavailable, audience
from campaigns.models import Campaign

FORMAT_VERSION = 1


def _utc(value: datetime | None) -> str | None:
    """An aware instant in UTC, ISO 8601 with Z: the same instant always reads the same."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _version(version: TemplateVersion | None, version_id: int | None) -> list | None:
    if version_id is None:
        return None
    return [version_id, version.content_hash if version else None]


def canonical_content(campaign: Campaign, templates: dict[str, TemplateVersion], members: Audience) -> dict[str, Any]:
    """The canonical content of ``campaign`` (see the module docstring).

    ``templates`` maps each id of ``campaign.template_versions`` (and of the correction
    version) to its row; an id without a row enters with a ``null`` hash.
    """
    segment = campaign.segment
    if campaign.correction_version_id is not None:
        version_id = campaign.correction_version_id
        correction: dict[str, Any] = {"version": _version(templates.get(version_id), version_id)}
    else:
        correction = {"none_reason": campaign.correction_none_reason}
    return {
        "v": FORMAT_VERSION,
        "kind": campaign.kind_id,
        "channel": campaign.channel,
        "templates": {
            language: _version(templates.get(version_id), version_id)
            for language, version_id in sorted(campaign.template_versions.items())
        },
        "params": campaign.params,
        "segment": {
            "id": segment.pk,
            "kind": segment.kind,
            "definition": segment.definition,
            "size": members.size,
            "members": members.digest,
        },
        "schedule": {
            "mode": campaign.schedule_mode,
            "send_at": _utc(campaign.send_at),
            "local_time": campaign.local_time.isoformat() if campaign.local_time else None,
        },
        "end_at": _utc(campaign.end_at),
        "correction": correction,
        **_pacing(campaign),
    }


def _pacing(campaign: Campaign) -> dict[str, Any]:
    """``{"pacing": {…}}`` with the pacing fields that are set; empty (no key at all) when none is."""
    hours = (campaign.sending_hours_start, campaign.sending_hours_end)
    pacing = {
        "spread_seconds": campaign.spread_seconds,
        "spread_until": _utc(campaign.spread_until),
        "rate_per_second": campaign.rate_per_second,
        "sending_hours": [hour.isoformat() for hour in hours] if None not in hours else None,
    }
    pacing = {name: value for name, value in pacing.items() if value is not None}
    return {"pacing": pacing} if pacing else {}


def digest(content: dict[str, Any]) -> str:
    """SHA-256 (64 hex digits) of ``content`` as canonical JSON."""
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def campaign_hash(campaign: Campaign, members: Audience | None = None) -> str:
    """The content hash of ``campaign`` as stored now: its templates and its segment's members read from the database.

    ``members``: the segment's ``Audience`` when the caller has just counted it (a list
    may hold millions: read it once). Raises ``actions.CampaignRefused`` (field ``segment``, 422)
    when the segment cannot be counted (``audience.AudienceUnavailable``: a filter that no longer
    validates or runs past its time): an approver reads why instead of a 500.
    """
    ids = [*campaign.template_versions.values(), campaign.correction_version_id]
    templates = TemplateVersion.objects.in_bulk([pk for pk in ids if pk is not None])
    try:
        members = members or audience(campaign.segment)
    except AudienceUnavailable as exc:
        from campaigns.actions import CampaignRefused  # here: actions imports this module

        raise CampaignRefused(str(exc), "segment") from None
    return digest(canonical_content(campaign, templates, members))
