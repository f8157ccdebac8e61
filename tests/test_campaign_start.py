"""What the scheduler checks when an approved campaign's time comes: is it still what was approved?"""

import pytest

from backend.notifications.models import Recipient
from campaigns import actions, fanout
from campaigns.audience import AudienceTimedOut
from campaigns.models import Campaign, CampaignAudit, Segment, SegmentMember
from tests.campaigns_setup import list_segment, submitted

GOLD = {"all": [{"field": "attributes.plan", "op": "eq", "value": "gold"}]}


@pytest.fixture
def gold_members(demo_data) -> list[Recipient]:
    return [
        Recipient.objects.create(user_id=f"gold-{n:02d}", email=f"gold{n}@example.com", attributes={"plan": "gold"})
        for n in range(10)
    ]


def approved(marketer, approver, segment: Segment) -> Campaign:
    campaign = submitted(marketer, segment=segment)
    return actions.approve(campaign, approver, campaign.content_hash)


def add_gold(how_many: int) -> None:
    Recipient.objects.bulk_create(
        Recipient(user_id=f"late-{n:02d}", email=f"late{n}@example.com", attributes={"plan": "gold"})
        for n in range(how_many)
    )


@pytest.mark.parametrize(
    ("joined", "starts"),
    [
        (0, True),
        (1, True),  # 10 approved: up to 11 (10 % more, rounded up) go without a new approval
        (2, False),  # 12 would be 20 % more than the approver was shown
    ],
)
def test_a_filter_audience_may_grow_a_little_between_approval_and_start(
    gold_members, marketer, approver, joined, starts
):
    segment = Segment.objects.create(name="Gold", kind=Segment.Kind.FILTER, definition=GOLD)
    campaign = approved(marketer, approver, segment)
    add_gold(joined)

    assert fanout.start_due() == ([campaign.pk] if starts else [])

    campaign.refresh_from_db()
    if starts:
        start = CampaignAudit.objects.get(campaign=campaign, action="start")
        assert (campaign.state, start.detail) == (Campaign.State.RUNNING, {"audience": 10 + joined})
    else:
        void = CampaignAudit.objects.get(campaign=campaign, action="void")
        assert (campaign.state, void.actor_name) == (Campaign.State.DRAFT, "scheduler")
        assert (
            "its filter now matches 12 recipients, 10 were approved (at most 11 may go without a new approval)"
            in (void.detail["reason"])
        )
        assert campaign.approvals.get().voided_at is not None


def test_a_list_audience_that_changed_after_approval_does_not_start(gold_members, marketer, approver):
    segment = list_segment([r.user_id for r in gold_members[:3]], name="Three")
    campaign = approved(marketer, approver, segment)
    SegmentMember.objects.create(segment=segment, recipient=gold_members[3])  # behind the actions' back

    assert fanout.start_due() == []

    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.DRAFT
    assert "its content changed after it was approved" in campaign.audit.get(action="void").detail["reason"]


def test_a_count_that_timed_out_is_tried_again_and_a_filter_that_no_longer_validates_goes_back_to_draft(
    gold_members, marketer, approver, monkeypatch
):
    segment = Segment.objects.create(name="Gold", kind=Segment.Kind.FILTER, definition=GOLD)
    campaign = approved(marketer, approver, segment)

    def timed_out(segment):
        raise AudienceTimedOut("Segment 'Gold': Could not count the recipients in 10 s: simplify the filter.")

    with monkeypatch.context() as patched:
        patched.setattr(fanout, "audience", timed_out)
        assert fanout.start_due() == []
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.APPROVED and not campaign.audit.filter(action="void").exists()

    Segment.objects.filter(pk=segment.pk).update(definition={"all": [{"field": "shoe_size", "op": "eq", "value": 9}]})
    assert fanout.start_due() == []
    campaign.refresh_from_db()
    assert campaign.state == Campaign.State.DRAFT
    assert "has a filter that cannot be used" in campaign.audit.get(action="void").detail["reason"]
