from collections.abc import Iterable

from django.db import models
from django.db.models.functions import Upper

from backend.notifications.locales import text_direction
from backend.notifications.pricing import phone_country


class RecipientQuerySet(models.QuerySet):
    """Writes that keep ``phone_country`` the country of ``phone``, as ``Recipient.save`` does."""

    def update(self, **kwargs) -> int:
        """``QuerySet.update``; a new ``phone`` brings its country ("", not known, for an expression)."""
        if "phone" in kwargs and "phone_country" not in kwargs:
            phone = kwargs["phone"]
            kwargs["phone_country"] = phone_country(phone) if isinstance(phone, str) else ""
        return super().update(**kwargs)

    def bulk_create(self, objs: Iterable["Recipient"], *args, **kwargs) -> list["Recipient"]:
        """``QuerySet.bulk_create``, each recipient's ``phone_country`` set from its ``phone`` first.

        An upsert (``update_conflicts``) that updates ``phone`` updates its country with it.
        """
        objs = list(objs)
        for recipient in objs:
            recipient.phone_country = phone_country(recipient.phone)
        fields = kwargs.get("update_fields")
        if fields and "phone" in fields and "phone_country" not in fields:
            kwargs["update_fields"] = [*fields, "phone_country"]
        return super().bulk_create(objs, *args, **kwargs)

    def bulk_update(self, objs: Iterable["Recipient"], fields, *args, **kwargs) -> int:
        """``QuerySet.bulk_update``; when it writes ``phone``, it writes each one's country too."""
        objs, fields = list(objs), list(fields)
        if "phone" in fields:
            for recipient in objs:
                recipient.phone_country = phone_country(recipient.phone)
            fields = [*fields, "phone_country"] if "phone_country" not in fields else fields
        return super().bulk_update(objs, fields, *args, **kwargs)


class Recipient(models.Model):
    """A person's contact data, keyed by the calling company's own user id.

    ``phone`` is E.164 (``+9665…``) and ``phone_country`` its country (``SA``; "" for none or not
    known, which a reader computes again), ``language`` a lowercase ISO 639-1 code,
    ``time_zone`` an IANA name (``Asia/Riyadh``), ``attributes`` a flat object of
    strings and numbers (``{"plan": "gold", "orders": 7}``, ≤ 4 KiB of JSON) that
    segments filter on. Validation lives in the API
    serializer, which normalises before anything is stored.
    """

    user_id = models.CharField(max_length=128, unique=True)
    email = models.EmailField(blank=True, db_index=True)
    phone = models.CharField(max_length=16, blank=True, db_index=True)
    # Computed where the phone is written (save, and RecipientQuerySet's bulk writes): a delivery prices each SMS
    # by it, and parsing the number again for each SMS was 6 % of a batch thread's CPU (README "Delivery in batches").
    phone_country = models.CharField(
        max_length=2,
        blank=True,
        default="",
        db_default="",  # a row inserted by SQL that names no country (a benchmark's): not known
        editable=False,
        help_text="ISO 3166-1 alpha-2 country of the phone (phonenumbers' region), kept with it; "
        "empty: none or not known.",
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

    def save(self, **kwargs) -> None:
        """``Model.save``, ``phone_country`` set from ``phone`` whenever the phone is written."""
        fields = kwargs.get("update_fields")
        if fields is None or "phone" in fields:
            self.phone_country = phone_country(self.phone)
            if fields is not None:
                kwargs["update_fields"] = {*fields, "phone_country"}
        super().save(**kwargs)

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
        return f"{self.platform}:{self.token[:16]}…"


class Preference(models.Model):
    """A user's choice for one kind on one channel; without a row, the kind's default (on) applies."""

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="preferences")
    kind = models.ForeignKey("notifications.Kind", on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=8)
    enabled = models.BooleanField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["recipient", "kind", "channel"], name="preference_unique")]

    def __str__(self) -> str:
        return f"{self.recipient_id} {self.kind_id}/{self.channel}: {'on' if self.enabled else 'off'}"
