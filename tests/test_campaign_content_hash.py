"""The content hash an approval binds to changes with everything that decides what a campaign sends."""

import copy
from datetime import UTC, datetime, time

import pytest

from backend.notifications.models import Kind, Recipient, TemplateVersion
from campaigns.audience import Audience
from campaigns.content_hash import campaign_hash, canonical_content, digest
from campaigns.models import Campaign, ScheduleMode, SegmentMember
from tests.campaigns_setup import draft, list_segment

BASE = {
    "v": 1,
    "kind": 3,
    "channel": "email",
    "templates": {"ar": [11, "a" * 64], "en": [12, "b" * 64]},
    "params": {"percent": "20"},
    "segment": {"id": 7, "kind": "list", "definition": {}, "size": 3, "members": "c" * 64},
    "schedule": {"mode": "at", "send_at": "2026-12-01T09:00:00.000000Z", "local_time": None},
    "end_at": None,
    "correction": {"none_reason": "none needed"},
}

# (what changes, how): each must give another hash.
CHANGES = [
    ("kind", lambda c: c.update(kind=4)),
    ("channel", lambda c: c.update(channel="push")),
    ("a template version id", lambda c: c["templates"].update(en=[13, "b" * 64])),
    ("a template's content hash", lambda c: c["templates"].update(en=[12, "d" * 64])),
    ("a language more", lambda c: c["templates"].update(fa=[14, "e" * 64])),
    ("params", lambda c: c.update(params={"percent": "25"})),
    ("segment", lambda c: c["segment"].update(id=8)),
    ("segment definition", lambda c: c["segment"].update(definition={"language": ["ar"]})),
    ("member count", lambda c: c["segment"].update(size=4)),
    ("members", lambda c: c["segment"].update(members="f" * 64)),
    ("schedule mode", lambda c: c["schedule"].update(mode="now", send_at=None)),
    ("send_at", lambda c: c["schedule"].update(send_at="2026-12-01T09:00:01.000000Z")),
    ("local time", lambda c: c["schedule"].update(mode="local_time", send_at=None, local_time="09:00:00")),
    ("end time", lambda c: c.update(end_at="2026-12-02T09:00:00.000000Z")),
    ("correction reason", lambda c: c.update(correction={"none_reason": "none needed."})),
    ("correction template", lambda c: c.update(correction={"version": [20, "a" * 64]})),
]


def test_the_hash_is_sha256_hex_and_stable_whatever_the_key_order():
    reordered = dict(reversed(list(BASE.items())))
    assert digest(BASE) == digest(reordered)
    assert len(digest(BASE)) == 64 and int(digest(BASE), 16) >= 0


@pytest.mark.parametrize(("field", "change"), CHANGES, ids=[field for field, _ in CHANGES])
def test_each_field_changes_the_hash(field, change):
    changed = copy.deepcopy(BASE)
    change(changed)
    assert changed != BASE
    assert digest(changed) != digest(BASE)


def _content(campaign: Campaign) -> dict:
    ids = [*campaign.template_versions.values(), campaign.correction_version_id]
    templates = TemplateVersion.objects.in_bulk([pk for pk in ids if pk])
    return canonical_content(campaign, templates, Audience(size=3, digest="c" * 64))


@pytest.mark.django_db
def test_the_canonical_content_reads_every_field_of_a_campaign(marketer):
    promo_en = TemplateVersion.objects.get(kind__name="promo", language="en", channel="email")
    campaign = draft(
        marketer,
        template_versions={"en": promo_en.pk},
        schedule_mode=ScheduleMode.AT,
        send_at=datetime(2030, 12, 1, 12, 0, tzinfo=UTC),
        end_at=datetime(2030, 12, 2, 12, 0, tzinfo=UTC),
    )
    assert _content(campaign) == {
        "v": 1,
        "kind": Kind.objects.get(name="promo").pk,
        "channel": "email",
        "templates": {"en": [promo_en.pk, promo_en.content_hash]},
        "params": {"percent": "20"},
        "segment": {"id": campaign.segment_id, "kind": "list", "definition": {}, "size": 3, "members": "c" * 64},
        "schedule": {"mode": "at", "send_at": "2030-12-01T12:00:00.000000Z", "local_time": None},
        "end_at": "2030-12-02T12:00:00.000000Z",
        "correction": {"none_reason": "A price correction would go out as a new campaign."},
    }
    campaign.schedule_mode, campaign.send_at, campaign.local_time = ScheduleMode.LOCAL_TIME, None, time(9, 0)
    assert _content(campaign)["schedule"] == {"mode": "local_time", "send_at": None, "local_time": "09:00:00"}


@pytest.mark.django_db
def test_a_member_added_to_the_list_changes_the_hash(marketer):
    campaign = draft(marketer, segment=list_segment(("u-ar-1", "u-en-1")))
    before = campaign_hash(campaign)
    assert campaign_hash(campaign) == before
    SegmentMember.objects.create(segment=campaign.segment, recipient=Recipient.objects.get(user_id="u-fa-1"))
    assert campaign_hash(campaign) != before
