"""Campaign builders shared by the tests/test_campaign_*.py modules (on top of the demo data)."""

from backend.notifications.models import Kind, Recipient
from campaigns import actions
from campaigns.models import Campaign, Segment, SegmentMember

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
