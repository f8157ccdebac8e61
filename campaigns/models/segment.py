from django.conf import settings
from django.db import models

from backend.notifications.models import ApiClient, Recipient


class Segment(models.Model):
    """A named audience: a filter over contact data, or an uploaded list of users.

    ``kind="filter"`` keeps its rule in ``definition`` (a JSON object; its shape and
    its query belong to ``campaigns/segment_query.py``). ``kind="list"`` keeps its
    members as ``SegmentMember`` rows (an uploaded CSV, or the ``user_ids`` of
    ``POST /api/v1/campaigns``). Created by a staff user or by an API client.
    """

    class Kind(models.TextChoices):
        FILTER = "filter", "Filter over contact data"
        LIST = "list", "Uploaded list of users"

    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    definition = models.JSONField(default=dict, blank=True, help_text="A filter segment's rule; {} for a list.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    client = models.ForeignKey(
        ApiClient, null=True, blank=True, on_delete=models.PROTECT, related_name="+", help_text="Made over the API."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(Recipient, through="SegmentMember", related_name="+")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["-created_at"], name="segment_recent_idx")]

    def __str__(self) -> str:
        return self.name


class SegmentMember(models.Model):
    """One user of an uploaded-list segment."""

    segment = models.ForeignKey(Segment, on_delete=models.CASCADE, related_name="memberships")
    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["segment", "recipient"], name="segment_member_unique")]

    def __str__(self) -> str:
        return f"{self.recipient_id} in segment {self.segment_id}"
