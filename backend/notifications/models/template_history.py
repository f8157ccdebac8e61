"""What happened to a template's versions, and by whom: the editor's history and the audit of template actions."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from backend.notifications.models.template import TemplateVersion

# The longest review comment, in characters: a paragraph or two for the writer, not a document.
MAX_COMMENT_CHARS = 2000


class TemplateEvent(models.Model):
    """One action on a template version: saved, approved, sent back, rejected, or sent as a test.

    Written in the same transaction as the change it records (``actions.templates``,
    ``actions.send_to_self``). ``comment`` is the reviewer's note to the writer
    (at most ``MAX_COMMENT_CHARS``). ``detail`` holds what the action needs to be
    understood later; for a test send: the channel, the masked address, the params
    with each secret one masked, and the outcome.
    """

    class Action(models.TextChoices):
        SAVE = "save", "Saved as a draft"
        APPROVE = "approve", "Approved"
        CHANGES = "changes", "Changes requested"
        REJECT = "reject", "Rejected"
        TEST = "test", "Test sent to self"

    version = models.ForeignKey(TemplateVersion, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, help_text="The username when it happened.")
    action = models.CharField(max_length=8, choices=Action.choices)
    comment = models.TextField(blank=True, max_length=MAX_COMMENT_CHARS)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-at", "-pk"]
        indexes = [
            models.Index(fields=["version", "at"], name="template_event_timeline_idx"),
            # The test-send throttle: one person's recent tests.
            models.Index(fields=["actor", "action", "at"], name="template_event_actor_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.actor_name} {self.action} {self.version_id}"
