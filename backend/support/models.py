"""The audit of contact data a support agent revealed, and the explorer's permissions."""

from django.conf import settings
from django.db import models


class ContactReveal(models.Model):
    """One reveal of a masked phone number or email address: who, when, which record and field.

    Written by ``backend.support.reveal.reveal`` before the clear value is shown, never
    changed afterwards. The Meta permissions are the explorer's role rules: ``use_explorer`` opens
    ``/support/``, ``reveal_contact`` shows a masked value (both held by the "support agent" group).
    """

    class Field(models.TextChoices):
        PHONE = "phone", "Phone"
        EMAIL = "email", "Email"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    username = models.CharField(max_length=150, help_text="Kept as written, should the account be renamed.")
    recipient = models.ForeignKey(
        "notifications.Recipient", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="None once the user's record was erased (backend/notifications/erasure.py); the audit stays.",
    )  # fmt: skip
    recipient_user_id = models.CharField(max_length=128, help_text="Kept as written, should the record be erased.")
    field = models.CharField(max_length=5, choices=Field.choices)
    reason = models.CharField(
        max_length=200, blank=True,
        help_text="Why the agent needed it, in their words (a ticket, a question); empty before 2026-12.",
    )  # fmt: skip
    notification = models.ForeignKey(
        "notifications.Notification", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        db_index=False, help_text="The notification page it was revealed on, if any.",
    )  # fmt: skip
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at"]
        # Deleting a notification (retention) sets its reveals' notification to NULL, and the foreign key's
        # check reads them: without an index each deleted notification read the whole audit.
        indexes = [
            models.Index(
                fields=["notification"], condition=models.Q(notification__isnull=False),
                name="contactreveal_notification_idx",
            )
        ]  # fmt: skip
        permissions = [
            ("use_explorer", "Can search and read the support explorer"),
            ("reveal_contact", "Can reveal a masked phone number or email address"),
        ]

    def __str__(self) -> str:
        return f"{self.username} revealed {self.field} of {self.recipient_user_id}"
