from django.db import models


class UnsubscribeToken(models.Model):
    """The opaque value in a marketing mail's unsubscribe links: one per recipient × kind × channel.

    ``token`` is random (``secrets.token_urlsafe``, 192 bits) and says nothing about whom it
    belongs to; this row does. ``kind`` is a name, not a key: a link that outlives its kind
    answers "we no longer send these" rather than "not valid". Deleting the recipient deletes
    their tokens.
    """

    token = models.CharField(max_length=64, unique=True)
    recipient = models.ForeignKey("notifications.Recipient", on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=64)
    channel = models.CharField(max_length=8)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["recipient", "kind", "channel"], name="unsubscribe_token_unique")
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.kind}/{self.channel}"
