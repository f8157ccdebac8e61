"""Two-person approval of campaigns, bound to the content hash (campaigns/actions.py, DESIGN.md §5)."""

import re

import pytest
from django.contrib.auth.models import Group, User

from backend.notifications.models import Kind
from campaigns import actions
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, SegmentMember
from tests.campaigns_setup import draft, submitted


@pytest.fixture
def both_roles(marketer) -> User:
    """The marketer who was also given the approver role."""
    marketer.groups.add(Group.objects.get(name="approver"))
    return User.objects.get(pk=marketer.pk)  # a fresh object: permissions are cached per instance


def audit_trail(campaign: Campaign) -> list[tuple[str, str]]:
    return list(CampaignAudit.objects.filter(campaign=campaign).values_list("actor_name", "action"))


def test_a_second_person_approves_what_they_were_shown(marketer, approver):
    campaign = submitted(marketer)
    approved = actions.approve(campaign, approver, campaign.content_hash)
    assert approved.state == Campaign.State.APPROVED
    [approval] = CampaignApproval.objects.filter(campaign=campaign)
    assert (approval.approver, approval.decision, approval.content_hash) == (
        approver, "approved", campaign.content_hash
    )  # fmt: skip
    assert audit_trail(campaign) == [("marketer", "create"), ("marketer", "submit"), ("approver", "approve")]


def test_it_refuses_self_approval_even_with_both_roles(both_roles):
    campaign = submitted(both_roles)
    assert both_roles.has_perm("campaigns.approve_campaign")
    with pytest.raises(actions.PermissionRefused) as refused:
        actions.approve(campaign, both_roles, campaign.content_hash)
    assert refused.value.message == f"{campaign} was written by marketer: a second person must approve it."
    assert refused.value.status == 403
    assert Campaign.objects.get(pk=campaign.pk).state == Campaign.State.SUBMITTED


def test_a_superuser_author_cannot_approve_their_own_campaign(demo_data):
    admin = User.objects.get(username="admin")
    campaign = submitted(admin)
    with pytest.raises(actions.PermissionRefused, match="was written by admin: a second person must approve it"):
        actions.approve(campaign, admin, campaign.content_hash)


def test_whoever_edited_a_campaign_may_not_approve_it(both_roles):
    campaign = draft(User.objects.get(username="admin"))
    actions.edit(campaign, both_roles, params={"percent": "30"})
    campaign = actions.submit(campaign, both_roles)
    with pytest.raises(actions.PermissionRefused, match="was written by marketer"):
        actions.approve(campaign, both_roles, campaign.content_hash)


def test_it_refuses_an_approver_without_the_permission(marketer, outsider):
    campaign = submitted(marketer)
    with pytest.raises(actions.PermissionRefused, match=re.escape("support may not approve campaigns.")):
        actions.approve(campaign, outsider, campaign.content_hash)


def test_a_stale_hash_is_a_content_changed_error(marketer, approver):
    campaign = submitted(marketer)
    stale = "0" * 64
    with pytest.raises(actions.ContentChanged) as changed:
        actions.approve(campaign, approver, stale)
    assert changed.value.status == 409
    assert changed.value.message == (
        f"{campaign} is not what you were shown (content hash 000000000000…, it has "
        f"{campaign.content_hash[:12]}…): open it again, read it, and decide on what it says now."
    )
    assert Campaign.objects.get(pk=campaign.pk).state == Campaign.State.SUBMITTED
    assert not CampaignApproval.objects.exists()


def test_a_member_removed_after_submit_voids_the_submission(marketer, approver):
    campaign = submitted(marketer)
    shown = campaign.content_hash
    SegmentMember.objects.filter(segment=campaign.segment, recipient__user_id="u-fa-1").delete()
    with pytest.raises(actions.ContentChanged, match="changed after it was submitted and is back to draft"):
        actions.approve(campaign, approver, shown)
    campaign.refresh_from_db()
    assert (campaign.state, campaign.content_hash) == (Campaign.State.DRAFT, "")
    assert audit_trail(campaign)[-1] == ("approver", "void")


def test_an_edit_after_approval_voids_it_and_says_why(marketer, approver):
    campaign = submitted(marketer)
    approved_hash = campaign.content_hash
    actions.approve(campaign, approver, approved_hash)
    edited = actions.edit(campaign, marketer, params={"percent": "25"})
    assert (edited.state, edited.content_hash, edited.params) == (Campaign.State.DRAFT, "", {"percent": "25"})
    assert CampaignApproval.objects.get(campaign=campaign).voided_at is not None
    last = CampaignAudit.objects.filter(campaign=campaign).last()
    assert (last.actor_name, last.action) == ("marketer", "edit")
    assert last.detail == {
        "changed": ["params"],
        "from_state": "approved",
        "reason": f"Back to draft: edited while approved (params changed); the submission of "
        f"{approved_hash[:12]}… and any approval of it are void.",
    }


def test_an_edit_of_a_submitted_campaign_returns_it_to_draft(marketer, approver):
    campaign = submitted(marketer)
    actions.edit(campaign, marketer, name="Weekend sale, final")
    with pytest.raises(actions.PermissionRefused, match="is draft, not waiting for approval"):
        actions.approve(campaign, approver, campaign.content_hash)


def test_a_rejection_needs_a_comment_and_is_recorded(marketer, approver):
    campaign = submitted(marketer)
    with pytest.raises(actions.CampaignRefused, match="Say why you reject it"):
        actions.reject(campaign, approver, campaign.content_hash, "  ")
    rejected = actions.reject(campaign, approver, campaign.content_hash, "20% is too much.")
    assert rejected.state == Campaign.State.REJECTED
    assert CampaignApproval.objects.get(campaign=campaign).comment == "20% is too much."
    assert CampaignAudit.objects.filter(campaign=campaign).last().detail == {"comment": "20% is too much."}


def test_cancel_by_the_author_or_an_approver_only(marketer, approver, outsider):
    campaign = submitted(marketer)
    with pytest.raises(actions.PermissionRefused, match="support may not cancel"):
        actions.cancel(campaign, outsider)
    assert actions.cancel(campaign, approver).state == Campaign.State.CANCELLED
    with pytest.raises(actions.CampaignRefused, match="is already cancelled"):
        actions.cancel(campaign, marketer)
    assert audit_trail(campaign)[-1] == ("approver", "cancel")
    assert CampaignAudit.objects.filter(campaign=campaign).last().detail == {
        "from_state": "submitted", "sent": 0, "cancelled": 0, "in_flight": 0, "counts": {},
    }  # fmt: skip


def test_a_marketing_kind_can_never_stop_honouring_opt_outs(demo_data):
    """A superuser unticking promo's opt-out after a campaign's approval sent it to someone who had opted out."""
    from django.core.exceptions import ValidationError
    from django.db import IntegrityError, transaction

    promo = Kind.objects.get(name="promo")
    promo.opt_out_allowed = False
    with pytest.raises(ValidationError, match=re.escape("A marketing kind must let people opt out.")):
        promo.full_clean()  # what the admin's form runs
    with pytest.raises(IntegrityError), transaction.atomic():
        Kind.objects.filter(pk=promo.pk).update(opt_out_allowed=False)
    assert Kind.objects.get(pk=promo.pk).opt_out_allowed is True


def test_a_comment_over_2000_characters_is_refused_and_nothing_decided(marketer, approver):
    campaign = submitted(marketer)
    with pytest.raises(actions.CampaignRefused) as refused:
        actions.reject(campaign, approver, campaign.content_hash, "x" * 2_001)
    assert (refused.value.field, refused.value.message) == (
        "comment", "A comment is up to 2,000 characters; this one has 2,001."
    )  # fmt: skip
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.SUBMITTED and not campaign.approvals.exists()
    assert actions.approve(campaign, approver, campaign.content_hash, "y" * 2_000).state == Campaign.State.APPROVED
