from django.db import models


class BreakerEvent(models.Model):
    """A circuit breaker changing state (closed → open → half-open → closed), kept for support and the drill."""

    class State(models.TextChoices):
        CLOSED = "closed", "Closed"
        OPEN = "open", "Open"
        HALF_OPEN = "half-open", "Half-open"

    provider = models.CharField(max_length=32)
    from_state = models.CharField(max_length=9, choices=State.choices)
    to_state = models.CharField(max_length=9, choices=State.choices)
    reason = models.CharField(max_length=255, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["provider", "-at"], name="breaker_event_idx")]

    def __str__(self) -> str:
        return f"{self.provider}: {self.from_state} → {self.to_state}"
