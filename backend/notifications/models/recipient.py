from collections.abc import Iterable

from django.db import models
from django.db.models.functions import Upper

from backend.notifications.locales import text_direction
from backend.notifications.pricing import phone_country

# The phone's country and the phone it is the country of, written together.
_PHONE_COUNTRY = ("phone_country", "phone_country_of")


class RecipientQuerySet(models.QuerySet):
    """``bulk_create`` storing each phone's country with it, as ``Recipient.save`` does."""

    def bulk_create(self, objs: Iterable["Recipient"], *args, **kwargs) -> list["Recipient"]:
        """``QuerySet.bulk_create``, each recipient's phone country stored first (``Recipient.store_phone_country``).

        An upsert (``update_conflicts``) that updates ``phone`` updates its country with it.
        """
        objs = list(objs)
        for recipient in objs:
            recipient.store_phone_country()
        fields = kwargs.get("update_fields")
        if fields and "phone" in fields:
            kwargs["update_fields"] = [*fields, *_PHONE_COUNTRY]
        return super().bulk_create(objs, *args, **kwargs)


class Recipient(models.Model):
    """A person's contact data, keyed by the calling company's own user id.

    ``phone`` is E.164 (``+9665…``; its country in ``known_phone_country``), ``language`` a lowercase ISO 639-1 code,
    ``time_zone`` an IANA name (``Asia/Riyadh``), ``attributes`` a flat object of
    strings and numbers (``{"plan": "gold", "orders": 7}``, ≤ 4 KiB of JSON) that
    segments filter on. Validation lives in the API
    serializer, which normalises before anything is stored.
    """

    user_id = models.CharField(max_length=128, unique=True)
    email = models.EmailField(blank=True, db_index=True)
    phone = models.CharField(max_length=16, blank=True, db_index=True)
    # The phone's country, stored where the phone is written (save, bulk_create), beside the phone it is the country
    # of: a delivery prices each SMS by it while that is still the phone (known_phone_country), and parsing the
    # number for each SMS was 6–9 % of a batch thread's CPU (README "Delivery in batches"). A writer that changes the
    # phone without them (an UPDATE, older code during a deploy) leaves a pair that no longer matches: not trusted.
    phone_country = models.CharField(
        max_length=2,
        blank=True,
        default="",
        db_default="",
        editable=False,
        help_text="ISO 3166-1 alpha-2 country of phone_country_of (phonenumbers' region); empty: none.",
    )
    phone_country_of = models.CharField(
        max_length=16,
        blank=True,
        default="",
        db_default="",
        editable=False,
        help_text="The phone that phone_country is the country of.",
    )
    language = models.CharField(max_length=8, default="en")
    time_zone = models.CharField(max_length=64, default="UTC")
    quiet_hours_start = models.TimeField(null=True, blank=True, help_text="Local wall time, e.g. 22:00.")
    quiet_hours_end = models.TimeField(null=True, blank=True, help_text="Local wall time, e.g. 07:00.")
    email_bounced_at = models.DateTimeField(
        null=True, blank=True, help_text="Set by a permanent SMTP refusal; cleared when the email changes."
    )
    email_bounce = models.CharField(max_length=255, blank=True)
    phone_disabled_at = models.DateTimeField(
        null=True, blank=True, help_text="Set when an SMS provider calls the number invalid or unreachable."
    )
    phone_disabled_reason = models.CharField(max_length=255, blank=True)
    attributes = models.JSONField(
        default=dict, blank=True, help_text="Flat object of strings and numbers the company filters segments on."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RecipientQuerySet.as_manager()

    class Meta:
        ordering = ["user_id"]
        # The support explorer finds an email whatever its case (backend/support/search.py).
        indexes = [models.Index(Upper("email"), name="recipient_email_upper_idx")]

    def __str__(self) -> str:
        return self.user_id

    def save(self, *args, **kwargs) -> None:
        """``Model.save``, the phone's country stored whenever the phone is written (``store_phone_country``)."""
        fields = kwargs.get("update_fields")
        if fields is not None:
            fields = kwargs["update_fields"] = list(fields)
        if "phone" not in self.get_deferred_fields() and (fields is None or "phone" in fields):
            self.store_phone_country()
            if fields is not None:
                fields += _PHONE_COUNTRY
        super().save(*args, **kwargs)

    def store_phone_country(self) -> None:
        """Set ``phone_country`` to the country of ``phone`` (``pricing.phone_country``), ``phone_country_of`` to it."""
        phone = self.phone if isinstance(self.phone, str) else ""  # an expression: nothing known
        self.phone_country, self.phone_country_of = phone_country(phone), phone

    @property
    def known_phone_country(self) -> str:
        """The country of ``phone`` as stored with it; "" when none is, or it was stored for another phone.

        "" tells a reader to parse the number itself (``pricing.price_message``).
        """
        return self.phone_country if self.phone and self.phone_country_of == self.phone else ""

    @property
    def text_direction(self) -> str:
        """``"rtl"`` when the recipient's language is written right to left (``locales.text_direction``)."""
        return text_direction(self.language)


class Device(models.Model):
    """A push destination of a recipient.

    ``token`` is the FCM registration token, or for Web Push the
    subscription's endpoint URL (its ``p256dh``/``auth`` keys in
    ``subscription``). A provider answering "unregistered" disables it.
    """

    class Platform(models.TextChoices):
        FCM = "fcm", "Firebase Cloud Messaging"
        WEBPUSH = "webpush", "Web Push"

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="devices")
    platform = models.CharField(max_length=8, choices=Platform.choices)
    token = models.CharField(max_length=1024)
    subscription = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(auto_now=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-last_seen_at"]
        constraints = [models.UniqueConstraint(fields=["platform", "token"], name="device_token_unique")]

    def __str__(self) -> str:
        # Masked as everywhere staff see a token: the admin shows this string.
        from backend.notifications.masking import mask_push_token

        return f"{self.platform}:{mask_push_token(self.platform, self.token)}"


class Preference(models.Model):
    """A user's choice for one kind on one channel; without a row, the kind's default (on) applies."""

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="preferences")
    kind = models.ForeignKey("notifications.Kind", on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=8)
    enabled = models.BooleanField()
    updated_at = models.DateTimeField(auto_now=True)
    changed_by = models.CharField(
        max_length=120, blank=True,
        help_text="Who made the last change, as support reads it: \"the user, in the preference center\", "
                  "\"API client shop-backend\"… Empty for a change made before it was recorded.",
    )  # fmt: skip

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recipient", "kind", "channel"], name="preference_unique")]

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.kind_id}/{self.channel}: {'on' if self.enabled else 'off'}"
