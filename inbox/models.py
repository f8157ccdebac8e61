"""The in-app inbox's one table: a message in a person's inbox (DESIGN.md §3, §6)."""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from backend.notifications.locales import text_direction
from backend.notifications.models import Notification, Recipient


class InboxMessage(models.Model):
    """One message in one person's inbox, written when an ``inapp`` notification is delivered.

    ``id`` is the cursor of the WebSocket protocol: a client syncs "every
    message after id N". Writers take a per-recipient lock before inserting
    (``actions.deliver``), so a person's ids grow in commit order and a cursor
    never skips a message that committed late.

    ``notification`` is UNIQUE: a retried delivery finds the message it already
    wrote. It is SET NULL on delete so the 90-day retention of notifications
    does not empty people's inboxes. ``kind`` is the kind's name and
    ``language`` the template's (for ``dir``); ``link`` is an http(s) URL or a
    site path, checked by ``inbox.provider``.
    """

    recipient = models.ForeignKey(Recipient, on_delete=models.CASCADE, related_name="inbox_messages")
    notification = models.OneToOneField(
        Notification, null=True, blank=True, on_delete=models.SET_NULL, related_name="inbox_message"
    )
    kind = models.CharField(max_length=64)
    language = models.CharField(max_length=8, default="en")
    title = models.CharField(max_length=255)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=2048, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # Every read is "this person's messages by id": pages, sync after an id, the newest id.
            models.Index(fields=["recipient", "id"], name="inbox_recipient_id_idx"),
            # The unread badge, counted on every change: only unread, unarchived rows are indexed.
            models.Index(
                fields=["recipient"],
                condition=Q(read_at__isnull=True, archived_at__isnull=True),
                name="inbox_unread_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} → {self.recipient_id}"

    @property
    def is_unread(self) -> bool:
        return self.read_at is None and self.archived_at is None

    @property
    def direction(self) -> str:
        """``"rtl"`` when the message's language is written right to left."""
        return text_direction(self.language)
