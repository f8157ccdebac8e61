from django.core.exceptions import ValidationError
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


class OverLimit(models.TextChoices):
    """What happens to a notification over the user's rate limit."""

    SUPPRESS = "suppress", "Suppress it"
    DIGEST = "digest", "Fold it into one digest sent when the window reopens"


def _validate_channels(value) -> None:
    if not isinstance(value, list) or not value or any(c not in Channel.values for c in value):
        raise ValidationError(f"A non-empty list of channels from {Channel.values}.")
    if len(set(value)) != len(value):
        raise ValidationError("Each channel once.")


_PARAMS_SHAPE = '{"param": {"example": "5012", "max_length": 10, "secret": false}, ...}'


def _validate_params(value) -> None:
    if not isinstance(value, dict) or any(not isinstance(spec, dict) for spec in value.values()):
        raise ValidationError(_PARAMS_SHAPE)
    for name, spec in value.items():
        if not isinstance(spec.get("max_length", 0), int):
            raise ValidationError(f'"{name}": max_length must be a whole number, as in {_PARAMS_SHAPE}')
        if not isinstance(spec.get("secret", False), bool):
            raise ValidationError(f'"{name}": "secret" must be true or false, as in {_PARAMS_SHAPE}')


class Kind(models.Model):
    """A type of notification callers name (``otp``, ``shipped``, ``promo``).

    Callers send a kind and params, never text; the kind decides the channels
    (in order of preference), the tier, whether users may opt out, and what
    a rate-limited notification becomes. ``params`` declares each param with
    an example value and a maximum length, so a template can be priced for
    the example and for the worst case, and ``"secret": true`` for a param
    (an OTP code) that only the provider may see: masked in every preview,
    admin page, API read and log (``backend/notifications/masking.py``).
    The kind named ``DIGEST`` is the digest that holds rate-limited notifications.
    """

    DIGEST = "digest"

    name = models.SlugField(max_length=64, unique=True)
    description = models.CharField(max_length=200, blank=True)
    category = models.CharField(max_length=16, choices=Category.choices)
    priority = models.CharField(max_length=8, choices=Priority.choices, default=Priority.STANDARD)
    channels = models.JSONField(
        default=list,
        validators=[_validate_channels],
        help_text='Channels in order of preference, e.g. ["push", "sms", "email"].',
    )
    opt_out_allowed = models.BooleanField(
        default=True,
        help_text="Users may turn it off. Never for security kinds (OTP, security alerts); always for marketing.",
    )
    over_limit = models.CharField(max_length=8, choices=OverLimit.choices, default=OverLimit.SUPPRESS)
    params = models.JSONField(default=dict, blank=True, validators=[_validate_params])
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
        constraints = [
            # Marketing without the person's way out is unlawful (ePrivacy art. 13(2), CAN-SPAM §7704(a)(3)),
            # and a flag turned off after a campaign's approval would reach those who opted out.
            models.CheckConstraint(
                condition=~models.Q(category="marketing", opt_out_allowed=False),
                name="kind_marketing_allows_opt_out",
                violation_error_message="A marketing kind must let people opt out.",
            )
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def default_channel(self) -> str:
        """The channel used when a request names none and the user has no preference against it."""
        return self.channels[0]

    @property
    def declared_params(self) -> list[tuple[str, dict]]:
        """``params`` as (name, spec) pairs: templates cannot say ``params.items`` when a param is called "items"."""
        return sorted(self.params.items())

    @property
    def bypasses_user_policy(self) -> bool:
        """Security messages and OTPs ignore quiet hours, user rate limits and opt-outs (DESIGN.md §2)."""
        return self.category == Category.SECURITY
