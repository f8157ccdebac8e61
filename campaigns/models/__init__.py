"""Campaign models, one module per noun: audiences (segment.py); campaigns, approvals and audit (campaign.py)."""

from campaigns.models.campaign import Campaign, CampaignApproval, CampaignAudit, Origin, ScheduleMode
from campaigns.models.segment import Segment, SegmentMember

__all__ = ["Campaign", "CampaignApproval", "CampaignAudit", "Origin", "ScheduleMode", "Segment", "SegmentMember"]
