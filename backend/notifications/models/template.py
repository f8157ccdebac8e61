from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from backend.notifications.models.kind import Channel, Kind


class TemplateVersion(models.Model):
    """One version of the text of a kind in one language on one channel.

    Bodies use ``{{ param }}`` placeholders rendered in a sandbox
    (``rendering.py``). Only ``approved`` versions are sent; the newest
    approved version of a (kind, language, channel) wins. An approved version
    is never edited: a change is a new draft, approved again by someone with
    the approve permission who is not its author (``actions.approve_template``).
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        APPROVED = "approved", "Approved"

    kind = models.ForeignKey(Kind, on_delete=models.PROTECT, related_name="templates")
    language = models.CharField(max_length=8)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    subject = models.CharField(max_length=255, blank=True, help_text="Email only.")
    text_body = models.TextField(help_text="Plain text; the SMS/push text and the email's text part.")
    html_body = models.TextField(blank=True, help_text="Email only: the HTML part's body.")
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["kind__name", "language", "channel", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "language", "channel", "version"],
                name="template_version_unique",
            )
        ]
        indexes = [models.Index(fields=["kind", "channel", "status", "language"], name="template_lookup_idx")]
        permissions = [("approve_templateversion", "Can approve template versions (never one's own)")]

    def __str__(self) -> str:
        return f"{self.kind.name}/{self.language}/{self.channel} v{self.version}"

    def clean(self) -> None:
        from backend.notifications.rendering import text_problem

        errors = {part: text_problem(getattr(self, part)) for part in ("subject", "text_body", "html_body")}
        errors = {part: problem for part, problem in errors.items() if problem}
        if errors:
            raise ValidationError(errors)
