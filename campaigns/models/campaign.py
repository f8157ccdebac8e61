from django.conf import settings
from django.db import models

from backend.notifications.models import ApiClient, Channel, Kind, TemplateVersion
from campaigns.models.segment import Segment


class ScheduleMode(models.TextChoices):
    NOW = "now", "As soon as it is approved"
    AT = "at", "At an instant"
    LOCAL_TIME = "local_time", "At a wall time in each recipient's time zone"


class Origin(models.TextChoices):
    """Why a campaign was made from another one (``Campaign.origin``)."""

    NONE = "", "Composed"
    REMAINDER = "remainder", "Resend to the remainder of a cancelled campaign"
    CORRECTION = "correction", "Correction of a sent campaign"


class Campaign(models.Model):
    """One mass send: a kind's approved template to a segment, on a schedule, approved by a second person.

    The lifecycle (``campaigns/actions.py`` is the only writer): ``draft`` → ``submitted``
    (``content_hash`` frozen) → ``approved`` or ``rejected``; an edit of a submitted,
    approved or rejected campaign returns it to ``draft``. The scheduler starts an
    approved campaign whose time came (``running``), the fan-out makes its notifications
    (``fanned_out_at`` once every recipient has one) and it is ``done`` when none is left
    to send (``campaigns/fanout.py``); ``cancelled`` may end any state before ``done``.
    A running campaign may be ``paused`` (``paused_at`` set) and resumed to ``running``: while
    paused nothing of it is made, released, fed or claimed, and it is never done.
    ``template_versions`` maps a language to the approved ``TemplateVersion`` id sent to
    recipients of that language: named by the author or resolved at submit (the newest
    approved version per language of kind × channel).
    """

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted for approval"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        SCHEDULED = "scheduled", "Scheduled"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"
        CANCELLED = "cancelled", "Cancelled"
        DONE = "done", "Done"

    name = models.CharField(max_length=200)
    kind = models.ForeignKey(Kind, on_delete=models.PROTECT, related_name="+")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    template_versions = models.JSONField(
        default=dict, blank=True, help_text='Language → approved template version id, e.g. {"en": 12, "ar": 13}.'
    )
    params = models.JSONField(default=dict, blank=True, help_text="Params shared by every recipient.")
    segment = models.ForeignKey(Segment, on_delete=models.PROTECT, related_name="campaigns")
    schedule_mode = models.CharField(max_length=10, choices=ScheduleMode.choices, default=ScheduleMode.NOW)
    send_at = models.DateTimeField(null=True, blank=True, help_text='The instant of an "at" schedule.')
    local_time = models.TimeField(null=True, blank=True, help_text='The wall time of a "local_time" schedule.')
    end_at = models.DateTimeField(
        null=True, blank=True, help_text="Nothing more is handed to a provider after it; the rest ends expired."
    )
    correction_version = models.ForeignKey(
        TemplateVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+",
        help_text="The approved version a correction of this campaign would send.",
    )  # fmt: skip
    correction_none_reason = models.TextField(blank=True, help_text="Why the campaign has no correction template.")
    state = models.CharField(max_length=10, choices=State.choices, default=State.DRAFT)
    content_hash = models.CharField(
        max_length=64, blank=True, help_text="SHA-256 frozen at submit (content_hash.py); empty in draft."
    )
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    client = models.ForeignKey(
        ApiClient, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="Made over the API."
    )
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_hash = models.CharField(max_length=64, blank=True, help_text="HMAC of the API request body.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    fanout_last_recipient = models.PositiveBigIntegerField(
        default=0, help_text="Recipients up to this id have their notification: the fan-out resumes after it."
    )
    fanned_out_at = models.DateTimeField(
        null=True, blank=True, help_text="When the fan-out had made a notification for every recipient (fanout.py)."
    )
    preflight = models.JSONField(
        default=dict, blank=True, help_text="The pre-flight figures frozen at submit (preflight.py); empty in draft."
    )
    origin = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="derived",
        help_text="The campaign this one resends the remainder of, or corrects.",
    )  # fmt: skip
    origin_purpose = models.CharField(max_length=10, choices=Origin.choices, default=Origin.NONE, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    paused_at = models.DateTimeField(
        null=True, blank=True, help_text="Since when the campaign is paused; empty when it is not (actions.pause)."
    )
    # Pacing (campaigns/pacing.py), part of the approved content hash when set.
    spread_seconds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Send evenly over this many seconds from the start (each wave's)."
    )
    spread_until = models.DateTimeField(
        null=True, blank=True, help_text="Send evenly from the start until this instant."
    )
    rate_per_second = models.FloatField(
        null=True, blank=True, help_text="At most this many messages a second (never above the budget)."
    )
    sending_hours_start = models.TimeField(
        null=True, blank=True, help_text="Daily window in each recipient's local time: from this…"
    )
    sending_hours_end = models.TimeField(null=True, blank=True, help_text="…until this one (exclusive).")
    paced_from = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Rate clock: rate × (now − paced_from) − paced_count may be fed.",
    )
    paced_count = models.PositiveBigIntegerField(default=0, help_text="Rows fed since paced_from (pacing.allowance).")
    # Retention (backend/notifications/retention.py) deletes a finished campaign's notifications once they are
    # older than NOTIFY_RETENTION_DAYS; its figures are frozen here first (campaigns/archive.py).
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="When its figures were frozen: retention may delete its notifications since."
    )
    archive = models.JSONField(
        default=dict, blank=True, help_text="Its figures at archived_at: counts per state, outcome, SMS cost, waves."
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["client", "idempotency_key"],
                condition=models.Q(client__isnull=False),
                name="campaign_idempotency_key_per_client",
            )
        ]
        indexes = [
            models.Index(fields=["state", "-created_at"], name="campaign_state_recent_idx"),
            models.Index(fields=["author", "-created_at"], name="campaign_author_recent_idx"),
        ]
        permissions = [("approve_campaign", "Can approve or reject campaigns (never one's own)")]

    def __str__(self) -> str:
        return f"campaign {self.pk} {self.name!r}"


class CampaignApproval(models.Model):
    """An approver's decision on the exact content hash they were shown; ``voided_at`` when an edit undid it."""

    class Decision(models.TextChoices):
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="approvals")
    approver = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    decision = models.CharField(max_length=8, choices=Decision.choices)
    comment = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64)
    at = models.DateTimeField(auto_now_add=True)
    voided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["campaign", "-at"], name="campaign_approval_recent_idx")]

    def __str__(self) -> str:
        return f"{self.decision} campaign {self.campaign_id} at {self.content_hash[:12]}"


class CampaignAudit(models.Model):
    """One action on a campaign: who (a staff user, or an API client by name), what, on which content hash.

    ``detail`` holds what the action needs to be understood later, e.g. the fields an
    edit changed and why the campaign went back to draft.
    """

    class Action(models.TextChoices):
        CREATE = "create", "Created"
        EDIT = "edit", "Edited"
        SUBMIT = "submit", "Submitted"
        APPROVE = "approve", "Approved"
        REJECT = "reject", "Rejected"
        VOID = "void", "Approval voided"
        CANCEL = "cancel", "Cancelled"
        SCHEDULE = "schedule", "Scheduled"
        START = "start", "Started"
        END = "end", "End time reached"
        DONE = "done", "Done"
        RESEND = "resend", "Remainder drafted"
        CORRECT = "correct", "Correction drafted"
        PAUSE = "pause", "Paused"
        RESUME = "resume", "Resumed"

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="audit")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=160, help_text="The username, or api:<client name>.")
    action = models.CharField(max_length=12, choices=Action.choices)
    content_hash = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]
        indexes = [
            models.Index(fields=["campaign", "at"], name="campaign_audit_timeline_idx"),
            models.Index(fields=["actor", "-at"], name="campaign_audit_actor_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} campaign {self.campaign_id}"
