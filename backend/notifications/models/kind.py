from django.db import models


class Category(models.TextChoices):
    SECURITY = "security", "Security"
    TRANSACTIONAL = "transactional", "Transactional"
    MARKETING = "marketing", "Marketing"


class Priority(models.TextChoices):
    """The delivery tier: each has its own Huey queue and worker pool."""

    HIGH = "high", "High"
    STANDARD = "standard", "Standard"


class Channel(models.TextChoices):
    EMAIL = "email", "Email"
    SMS = "sms", "SMS"
    PUSH = "push", "Push"
    INAPP = "inapp", "In-app"


class Kind(models.Model):
    """A type of notification callers name (``otp``, ``shipped``, ``promo``).

    Callers send a kind and params, never text; the kind decides the default
    channel and the tier a notification is delivered on.
    """

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    category = models.CharField(max_length=16, choices=Category.choices)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.STANDARD)
    default_channel = models.CharField(max_length=8, choices=Channel.choices)
    default_language = models.CharField(
        max_length=8,
        default="en",
        help_text="Language whose template is used when the recipient's is missing.",
    )
    validity_seconds = models.PositiveIntegerField(
        default=86400,
        help_text="Seconds after it is due that a notification may still be handed to a provider; "
        "past it, it ends expired (an OTP: minutes — a late code is worse than none).",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
