"""Campaign builders shared by the tests/test_campaign_*.py modules (on top of the demo data)."""

from django.utils import timezone

from backend.notifications.models import Kind, Notification, Recipient, State, TemplateVersion
from campaigns import actions, fanout
from campaigns.models import Campaign, ScheduleMode, Segment, SegmentMember

DEMO_USERS = ("u-ar-1", "u-en-1", "u-fa-1")


def list_segment(user_ids=DEMO_USERS, name: str = "Demo users") -> Segment:
    """A list segment of the demo recipients ``user_ids``."""
    segment = Segment.objects.create(name=name, kind=Segment.Kind.LIST)
    for recipient in Recipient.objects.filter(user_id__in=user_ids):
        SegmentMember.objects.create(segment=segment, recipient=recipient)
    return segment


def draft(author, **fields) -> Campaign:
    """``author``'s draft: promo by email to the demo users, now, with a reason for having no correction."""
    defaults = {
        "name": "Weekend sale",
        "kind": Kind.objects.get(name="promo"),
        "channel": "email",
        "params": {"percent": "20"},
        "segment": list_segment(),
        "correction_none_reason": "A price correction would go out as a new campaign.",
    }
    return actions.create_draft(author, **{**defaults, **fields}).campaign


def submitted(author, **fields) -> Campaign:
    """``author``'s draft, submitted for approval."""
    return actions.submit(draft(author, **fields), author)


def approved_and_started(author, approver, **fields) -> Campaign:
    """``author``'s draft, submitted, approved by ``approver`` and started (running, not fanned out yet)."""
    campaign = submitted(author, **fields)
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    assert actions.start(campaign)
    return campaign


def cancelled_mid_run(marketer, approver) -> Campaign:
    """A promo email campaign to the three demo users, cancelled with u-ar-1 sent, u-en-1 sending, u-fa-1 queued."""
    correction = TemplateVersion.objects.get(kind__name="promo", language="en", channel="email", status="approved")
    campaign = approved_and_started(
        marketer, approver, correction_version=correction, correction_none_reason="",
        schedule_mode=ScheduleMode.AT, send_at=timezone.now() + timezone.timedelta(minutes=1),
    )  # fmt: skip
    fanout.fan_out(campaign.pk)
    rows = {n.recipient.user_id: n for n in Notification.objects.filter(campaign=campaign).select_related("recipient")}
    sent_at = timezone.now()
    Notification.objects.filter(pk=rows["u-ar-1"].pk).update(state=State.SENT, sent_at=sent_at, provider="smtp")
    Notification.objects.filter(pk=rows["u-en-1"].pk).update(state=State.SENDING)
    return actions.cancel(campaign, marketer)
