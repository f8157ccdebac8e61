import uuid
from datetime import datetime, timedelta

from django.db import models
from django.db.models import F, Q
from django.db.models.lookups import IsNull
from django.utils import timezone

from backend.notifications.models.client import ApiClient
from backend.notifications.models.kind import Channel, Kind, Priority
from backend.notifications.models.recipient import Recipient
from backend.notifications.models.template import TemplateVersion


class State(models.TextChoices):
    """Where a notification is in its life (DESIGN.md §2).

    queued → sending → sent is the happy path; ``scheduled`` waits for
    ``send_at``; ``failed`` is a permanent provider error or the last attempt
    used up; ``suppressed`` and ``expired`` are policy stops with a reason;
    ``cancelled`` is a campaign's row that a person stopped before it was handed over.
    ``delivered`` and ``undelivered`` follow ``sent`` when the provider's delivery
    receipt says so (``receipts/``); the receipt rows keep the provider's code and meaning.
    """

    QUEUED = "queued", "Queued"
    SCHEDULED = "scheduled", "Scheduled"
    SENDING = "sending", "Sending"
    SENT = "sent", "Sent"
    FAILED = "failed", "Failed"
    SUPPRESSED = "suppressed", "Suppressed"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"
    DELIVERED = "delivered", "Delivered"
    UNDELIVERED = "undelivered", "Undelivered"


# "Made by a campaign", as the rate-limit reads ask it (policy._campaign_rows) and as the campaign rows' (recipient,
# created_at) index holds it. "+ 0" keeps the campaign index's condition (campaign_id IS NOT NULL) from matching: with
# stale statistics the planner read every campaign row through that one. One value, so the two cannot drift apart.
MADE_BY_CAMPAIGN = Q(IsNull(F("campaign_id") + 0, False))


class Notification(models.Model):
    """One request to reach one person with one kind, on one channel.

    ``idempotency_key`` names the event (``order-5012-shipped``) and is
    UNIQUE within its ``idempotency_scope`` (the calling client): the database
    is the last guarantee against duplicates, and two services that happen to
    pick the same key do not swallow each other's notifications.
    ``request_hash`` is a keyed SHA-256 (HMAC) of the canonical request, to tell a
    retry (same body) from a misuse of the key (different body).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: every lookup names the scope too, which the UNIQUE (scope, key) index serves.
    idempotency_key = models.CharField(max_length=255)
    idempotency_scope = models.CharField(
        max_length=40, help_text="Whose key it is: client:<id> for an API client; keys never collide across scopes."
    )
    request_hash = models.CharField(max_length=64)
    client = models.ForeignKey(
        ApiClient, null=True, blank=True, on_delete=models.SET_NULL, related_name="notifications", db_index=False,
        help_text="Indexed below where set: a campaign's rows have none.",
    )  # fmt: skip
    recipient = models.ForeignKey(
        Recipient, on_delete=models.PROTECT, related_name="notifications", db_index=False,
        help_text="Indexed by notification_recipient_idx, whose first column it is.",
    )  # fmt: skip
    kind = models.ForeignKey(
        Kind, on_delete=models.PROTECT, related_name="notifications", db_index=False,
        help_text="Not indexed: the product reads by kind with the recipient (notification_recipient_idx).",
    )  # fmt: skip
    channel = models.CharField(max_length=8, choices=Channel.choices)
    priority = models.CharField(max_length=8, choices=Priority.choices)
    params = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=12, choices=State.choices, default=State.QUEUED)
    reason = models.CharField(max_length=64, blank=True, help_text="Why it was suppressed, expired or failed.")
    send_at = models.DateTimeField(null=True, blank=True)
    digest = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="digested", db_index=False,
        help_text="Over the rate limit and folded into this digest notification (indexed below where set).",
    )  # fmt: skip
    template_version = models.ForeignKey(
        TemplateVersion, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False,
        help_text="Not indexed: nothing reads notifications by version, and versions are never deleted.",
    )  # fmt: skip
    preview = models.CharField(max_length=200, blank=True, help_text="Start of the rendered text.")
    provider = models.CharField(max_length=32, blank=True)
    provider_ref = models.CharField(max_length=255, blank=True)
    attempt_count = models.PositiveSmallIntegerField(default=0)
    replayed_attempts = models.PositiveSmallIntegerField(
        default=0, help_text="attempt_count when last replayed: retries are counted from here."
    )
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When it became due in its queue (later for a delayed retry)."
    )
    sending_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField(
        null=True, blank=True,
        help_text="While sending: the claiming worker holds it until then and renews it while alive.",
    )  # fmt: skip
    sent_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)
    campaign = models.ForeignKey(
        "campaigns.Campaign", null=True, blank=True, on_delete=models.PROTECT, related_name="notifications",
        db_index=False, help_text="The campaign whose fan-out made it (campaigns/fanout.py); indexed with state below.",
    )  # fmt: skip

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["idempotency_scope", "idempotency_key"], name="notification_idempotency")
        ]
        # Each index costs every insert, and a campaign inserts a million rows at once: indexes that
        # another one covers are left out, and those of columns mostly empty hold only the filled rows
        # (every lookup names a value, which implies the condition). README "Benchmarks" has the figures.
        # On PostgreSQL the indexed codes (scope, key, state, priority, provider, provider_ref) use the
        # "C" collation (migration 0018): an AlterField of one of them must set it again.
        indexes = [
            models.Index(fields=["recipient", "-created_at"], name="notification_recipient_idx"),
            # A send's rate-limit read: the recipient's campaign rows in the last day (policy._campaign_rows).
            # Through the index above it visited every row the recipient got in that day, API ones included,
            # so each send cost more the more the recipient had been sent; this one holds only campaign rows.
            models.Index(
                fields=["recipient", "created_at"], condition=MADE_BY_CAMPAIGN, name="notification_campaign_rcpt_idx"
            ),
            models.Index(fields=["client"], condition=Q(client__isnull=False), name="notification_client_idx"),
            models.Index(fields=["digest"], condition=Q(digest__isnull=False), name="notification_digest_idx"),
            # The sweeper's scans that run every second: claims whose lease expired, one tier's queued rows
            # (the high tier's few, without reading a campaign's million standard rows), and API rows whose
            # send_at came (a campaign's scheduled rows are released by its own tick). A delivery changes the
            # state twice and each change writes an entry in every index the new row version matches, so
            # state is a column only of the campaign index below, and queued or sent rows match none of these.
            models.Index(fields=["lease_until"], condition=Q(state="sending"), name="notification_lease_idx"),
            models.Index(
                fields=["priority", "queued_at"], condition=Q(state="queued"), name="notification_tier_queue_idx"
            ),
            models.Index(
                fields=["send_at"],
                condition=Q(state="scheduled", campaign__isnull=True),
                name="notification_scheduled_idx",
            ),
            # A campaign's progress per state, and the feeder's pick of its queued rows not yet handed over.
            # Nothing more: B-tree deduplication folds a batch's identical (campaign, state) entries, which
            # any further column would undo (the support explorer lists a campaign by the UNIQUE scope, key).
            # Campaigns' rows only: an API row's two state changes would each add a NULL entry nothing reads.
            models.Index(
                fields=["campaign", "state"], condition=Q(campaign__isnull=False), name="notification_campaign_idx"
            ),
            # A running campaign's pace (sent per minute over the last hour, campaigns/pace.py), read at each
            # 2 s poll of its page: 236 ms on a 1,000,000-row campaign through the sent_at BRIN (every row sent
            # in the hour, any campaign's). Only sent rows: a fan-out's inserts (sent_at NULL) never touch it.
            models.Index(
                fields=["campaign", "sent_at"],
                condition=Q(campaign__isnull=False, sent_at__isnull=False),
                name="notification_campaign_sent_idx",
            ),
            # A provider's reference: the support explorer's search (backend/support/search.py) and a delivery
            # receipt's match, whose provider is checked on the one row the reference finds.
            models.Index(fields=["provider_ref"], condition=~Q(provider_ref=""), name="notification_ref_search_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind.name} → {self.recipient.user_id} ({self.state})"

    @property
    def valid_until(self) -> datetime:
        """The last instant it may be handed to a provider: due time (send_at or creation) + the kind's validity."""
        return (self.send_at or self.created_at) + timedelta(seconds=self.kind.validity_seconds)

    @property
    def due_at(self) -> datetime:
        """When it was due: accepted, or its ``send_at`` if later (quiet hours, a schedule), as ``due_to_sent``."""
        return max(self.created_at, self.send_at or self.created_at)

    @classmethod
    def hold(cls, pk) -> bool:
        """Lock the notification ``pk`` until the transaction ends, against retention's delete; False if it is gone.

        A writer adding a row that refers to a notification (a delivery receipt, a reveal's audit) calls
        this first, inside its transaction: retention locks what it deletes (``retention.py``), so this
        waits for such a delete, and a row gone is then the caller's to report rather than a foreign-key
        error at commit. ``FOR NO KEY UPDATE``, so state moves of the row do not wait for it.
        """
        return cls.objects.select_for_update(no_key=True).filter(pk=pk).exists()

    def is_expired(self, now: datetime | None = None) -> bool:
        return (now or timezone.now()) > self.valid_until

    @property
    def retries_used(self) -> int:
        """Attempts since the last dead-letter replay (what the retry limit and backoff count)."""
        return self.attempt_count - self.replayed_attempts


class StateChange(models.Model):
    """One transition in a notification's history, with its reason."""

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="state_changes")
    from_state = models.CharField(max_length=12, choices=State.choices, blank=True)
    to_state = models.CharField(max_length=12, choices=State.choices)
    reason = models.CharField(max_length=64, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.from_state or '∅'} → {self.to_state}"


class Attempt(models.Model):
    """One call to a provider, written before the call and completed after it.

    ``latency_ms`` is wall time of the provider call in milliseconds; a row
    with no ``result`` is a call that never came back (the worker died).
    """

    class Result(models.TextChoices):
        SENT = "sent", "Sent"
        TRANSIENT = "transient", "Transient error"
        PERMANENT = "permanent", "Permanent error"

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveSmallIntegerField()
    provider = models.CharField(max_length=32)
    started_at = models.DateTimeField()
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    result = models.CharField(max_length=10, choices=Result.choices, blank=True)
    error = models.TextField(blank=True)
    provider_ref = models.CharField(max_length=255, blank=True)
    device = models.ForeignKey(
        "notifications.Device", null=True, blank=True, on_delete=models.SET_NULL, related_name="attempts",
        db_index=False,
    )  # fmt: skip
    sms_encoding = models.CharField(max_length=5, blank=True, help_text="GSM-7 or UCS-2.")
    sms_segments = models.PositiveSmallIntegerField(null=True, blank=True)
    cost = models.DecimalField(max_digits=10, decimal_places=5, null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)

    class Meta:
        ordering = ["number", "id"]
        # Every delivery inserts one and records its result: an index on a column the result sets makes that
        # update write a new entry in every index (no HOT update). Receipts and support find a reference on the
        # notification; only a push attempt names a device (the SET NULL of a deleted device reads these).
        indexes = [models.Index(fields=["device"], condition=Q(device__isnull=False), name="attempt_device_idx")]

    def __str__(self) -> str:
        return f"#{self.number} via {self.provider}: {self.result or 'in flight'}"

    @property
    def cost_label(self) -> str:
        """What support pages show for its cost: "0.04500 USD", "not billed" for a call the provider refused
        (whatever an older row stored as its quote, ``actions.NOT_BILLED``), "" when it was never priced."""
        if self.cost is None:
            return ""
        if self.result in (self.Result.TRANSIENT, self.Result.PERMANENT):
            return "not billed"
        return f"{self.cost} {self.currency}"


class DeadLetter(models.Model):
    """A notification whose transient failures used up its attempts; support can replay it.

    A replay never sends a notification past its kind's validity window.
    """

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="dead_letters")
    provider = models.CharField(max_length=32, blank=True)
    last_error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    replayed_at = models.DateTimeField(null=True, blank=True)
    replayed_by = models.CharField(max_length=150, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["replayed_at", "-created_at"], name="deadletter_open_idx")]

    def __str__(self) -> str:
        return f"dead letter of {self.notification_id}"


class VelocityAlarm(models.Model):
    """Too many OTP SMS to one country prefix in a minute: the signature of SMS pumping (toll fraud)."""

    country = models.CharField(max_length=2)
    count = models.PositiveIntegerField(help_text="OTP SMS to that country in the minute.")
    threshold = models.PositiveIntegerField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.country}: {self.count} OTP SMS/min (threshold {self.threshold})"
