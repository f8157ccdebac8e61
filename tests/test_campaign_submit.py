"""What submit refuses, with the message a marketer reads (campaigns/actions.py)."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from backend.notifications.models import Kind, Recipient, TemplateVersion
from campaigns import actions
from campaigns.audience import audience
from campaigns.models import Campaign, ScheduleMode, Segment
from tests.campaigns_setup import draft, list_segment

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_a_security_kind_cannot_be_a_campaign(marketer):
    with pytest.raises(actions.CampaignRefused) as refused:
        draft(marketer, kind=Kind.objects.get(name="otp"), channel="sms")
    assert (refused.value.field, refused.value.message) == ("kind", "otp: security kinds cannot be sent as a campaign")


def test_submit_freezes_the_hash_and_the_newest_approved_templates(marketer):
    campaign = actions.submit(draft(marketer), marketer)
    promo = TemplateVersion.objects.filter(kind__name="promo", channel="email")
    assert campaign.state == Campaign.State.SUBMITTED
    assert campaign.template_versions == {version.language: version.pk for version in promo}
    assert len(campaign.content_hash) == 64


def test_submit_needs_a_correction_template_or_a_reason(marketer):
    campaign = draft(marketer, correction_none_reason="")
    with pytest.raises(actions.CampaignRefused) as refused:
        actions.submit(campaign, marketer)
    assert refused.value.message == (
        "Name a correction template version (ready to send if this campaign goes wrong), or say why there is none."
    )
    correction = TemplateVersion.objects.get(kind__name="promo", language="en", channel="email")
    actions.edit(campaign, marketer, correction_version=correction)
    assert actions.submit(campaign, marketer).state == Campaign.State.SUBMITTED


def test_a_schedule_that_has_passed_by_submit_is_refused(marketer):
    with time_machine.travel(NOW, tick=False):
        campaign = draft(marketer, schedule_mode=ScheduleMode.AT, send_at=NOW + timedelta(minutes=5))
    later = NOW + timedelta(minutes=10)
    with time_machine.travel(later, tick=False), pytest.raises(actions.CampaignRefused) as refused:
        actions.submit(campaign, marketer)
    assert refused.value.field == "schedule.send_at"
    assert refused.value.message == (
        "The send time (send_at) 2026-12-01 08:05:00 UTC is in the past: pick a time after 2026-12-01 08:10:00 UTC."
    )


def test_an_unapproved_template_is_refused(marketer):
    kind = Kind.objects.get(name="promo")
    unapproved = TemplateVersion.objects.create(kind=kind, language="en", channel="email", version=2, text_body="Hi")
    with pytest.raises(actions.CampaignRefused) as refused:
        draft(marketer, template_versions={"en": unapproved.pk})
    assert refused.value.field == "template_versions.en"
    assert refused.value.message == "promo/en/email v2 is not approved: only approved versions are sent."


def test_an_empty_segment_is_refused(marketer):
    campaign = draft(marketer, segment=list_segment(user_ids=(), name="Nobody"))
    with pytest.raises(actions.CampaignRefused) as refused:
        actions.submit(campaign, marketer)
    assert refused.value.message == "Segment 'Nobody' has no members: nobody would get it."


def test_a_filter_segment_is_counted_by_its_query_when_submitted(marketer):
    arabic = {"all": [{"field": "language", "op": "in", "value": ["ar"]}]}
    segment = Segment.objects.create(name="Arabic speakers", kind=Segment.Kind.FILTER, definition=arabic)
    campaign = actions.submit(draft(marketer, segment=segment), marketer)
    assert campaign.state == Campaign.State.SUBMITTED
    assert audience(segment).size == Recipient.objects.filter(language="ar").count() >= 1


def test_a_filter_segment_whose_definition_is_broken_is_refused(marketer):
    segment = Segment.objects.create(name="Broken", kind=Segment.Kind.FILTER, definition={"language": ["ar"]})
    with pytest.raises(actions.CampaignRefused, match="Segment 'Broken' has a filter that cannot be used"):
        actions.submit(draft(marketer, segment=segment), marketer)


def test_a_user_without_the_permission_cannot_create_or_submit(marketer, outsider):
    with pytest.raises(actions.PermissionRefused, match=re.escape("support may not create campaigns.")):
        draft(outsider)
    with pytest.raises(actions.PermissionRefused, match=re.escape("support may not submit campaigns.")):
        actions.submit(draft(marketer), outsider)


def test_state_and_hash_are_not_fields_an_author_sets(marketer):
    campaign = draft(marketer)
    with pytest.raises(actions.CampaignRefused, match=re.escape("These fields cannot be set: content_hash, state.")):
        actions.edit(campaign, marketer, state=Campaign.State.APPROVED, content_hash="0" * 64)
    with pytest.raises(actions.CampaignRefused, match=re.escape("These fields cannot be set: state.")):
        draft(marketer, state=Campaign.State.APPROVED)


def test_submit_and_approve_count_the_audience_outside_any_transaction(marketer, approver, monkeypatch):
    """A big segment's count takes seconds: on SQLite a write transaction held meanwhile stopped every send."""
    from django.db import connection

    from campaigns import content_hash

    depths, outside = [], len(connection.atomic_blocks)  # pytest-django's own transaction
    real_audience = content_hash.audience

    def counting(segment):
        depths.append(len(connection.atomic_blocks))
        return real_audience(segment)

    monkeypatch.setattr(actions, "audience", counting)
    monkeypatch.setattr(content_hash, "audience", counting)
    campaign = actions.submit(draft(marketer), marketer)
    actions.approve(campaign, approver, campaign.content_hash)

    assert depths == [outside, outside]  # counted once by submit, once by approve; in no transaction of theirs


def test_an_edit_while_the_submit_counted_refuses_the_submit(marketer, monkeypatch):
    campaign = draft(marketer)
    real_preflight = actions.preflight

    def edited_meanwhile(current, now):
        actions.edit(Campaign.objects.get(pk=current.pk), marketer, params={"percent": "30"})
        return real_preflight(current, now)

    monkeypatch.setattr(actions, "preflight", edited_meanwhile)
    with pytest.raises(actions.ContentChanged, match="changed while it was being submitted"):
        actions.submit(campaign, marketer)
    campaign.refresh_from_db()
    assert (campaign.state, campaign.params, campaign.content_hash) == (Campaign.State.DRAFT, {"percent": "30"}, "")
