"""Campaigns, segments, approvals and audit in the admin: read-only for every role, the superuser included.

Every change goes through ``campaigns/actions.py`` (the two-person rule, the content hash);
the admin may never bypass it.
"""

from django.contrib import admin

from backend.notifications.admin import ListedFiltersOnly, ReadOnly
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, Segment, SegmentMember


@admin.register(Segment)
class SegmentAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = ["name", "kind", "created_by", "client", "created_at"]
    list_filter = ["kind"]
    search_fields = ["name"]
    list_select_related = ["created_by", "client"]
    # A count, not an inline of members: an uploaded list may hold millions.
    fields = ["name", "kind", "definition", "member_count", "created_by", "client", "created_at"]
    readonly_fields = fields

    @admin.display(description="members")
    def member_count(self, segment: Segment) -> int:
        return SegmentMember.objects.filter(segment=segment).count()


class CampaignApprovalInline(ReadOnly, admin.TabularInline):
    model = CampaignApproval
    extra = 0
    readonly_fields = ["at", "approver", "decision", "comment", "content_hash", "voided_at"]


class CampaignAuditInline(ReadOnly, admin.TabularInline):
    model = CampaignAudit
    extra = 0
    readonly_fields = ["at", "actor_name", "action", "content_hash", "detail"]
    exclude = ["actor"]


@admin.register(Campaign)
class CampaignAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = ["name", "kind", "channel", "state", "schedule_mode", "send_at", "author", "client", "created_at"]
    list_filter = ["state", "channel", "schedule_mode", "kind"]
    search_fields = ["=id", "name"]
    list_select_related = ["kind", "author", "client"]
    date_hierarchy = "created_at"
    readonly_fields = [f.name for f in Campaign._meta.fields if f.name != "request_hash"]
    exclude = ["request_hash"]
    inlines = [CampaignApprovalInline, CampaignAuditInline]


@admin.register(CampaignApproval)
class CampaignApprovalAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = ["at", "campaign", "approver", "decision", "content_hash", "voided_at"]
    list_filter = ["decision"]
    list_select_related = ["campaign", "approver"]
    readonly_fields = [f.name for f in CampaignApproval._meta.fields]


@admin.register(CampaignAudit)
class CampaignAuditAdmin(ListedFiltersOnly, ReadOnly, admin.ModelAdmin):
    list_display = ["at", "campaign", "actor_name", "action", "content_hash"]
    list_filter = ["action"]
    search_fields = ["=campaign__id", "actor_name"]
    list_select_related = ["campaign"]
    date_hierarchy = "at"
    readonly_fields = [f.name for f in CampaignAudit._meta.fields]
