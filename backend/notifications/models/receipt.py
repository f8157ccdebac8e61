from django.db import models

from backend.notifications.models.notification import Notification


class Receipt(models.Model):
    """One delivery receipt a provider posted for a notification (``receipts/``), kept once.

    ``status`` is the provider's own word (Twilio ``MessageStatus``, Vonage ``status``);
    ``code`` and ``meaning`` its error code and what the provider's documentation says it means
    ("" when none); ``outcome`` what it tells us: ``sent`` (still on its way), ``delivered`` or
    ``undelivered``. The same receipt posted twice (providers retry) is one row: UNIQUE
    (notification, status, code).
    """

    class Outcome(models.TextChoices):
        SENT = "sent", "Still on its way"
        DELIVERED = "delivered", "Delivered"
        UNDELIVERED = "undelivered", "Undelivered"

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="receipts", db_index=False,
        help_text="Indexed by receipt_once, whose first column it is.",
    )  # fmt: skip
    provider = models.CharField(max_length=32)
    provider_ref = models.CharField(max_length=255)
    status = models.CharField(max_length=32)
    code = models.CharField(max_length=16, blank=True)
    meaning = models.CharField(max_length=255, blank=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["received_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["notification", "status", "code"], name="receipt_once"),
        ]

    def __str__(self) -> str:
        code = f" {self.code}" if self.code else ""
        return f"{self.provider} {self.status}{code} for {self.notification_id}"
