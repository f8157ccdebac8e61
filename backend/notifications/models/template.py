import hashlib
import json

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from backend.notifications.models.kind import Channel, Kind

# What approval covers: the approver reads these, and only these decide what is sent.
CONTENT_FIELDS = ("kind_id", "language", "channel", "subject", "text_body", "html_body")
# The only columns a saved version ever changes: approval's conditional UPDATE (``actions.approve_template``).
APPROVAL_FIELDS = frozenset({"status", "approved_by", "approved_by_id", "approved_at"})


class ImmutableVersionError(Exception):
    """Code tried to change a saved template version; a change is a new version (``save_template_draft``)."""


def content_hash(kind_id: int, language: str, channel: str, subject: str, text_body: str, html_body: str) -> str:
    """The SHA-256 (64 hex digits) of a version's content: what an approval is bound to.

    Canonical form: the six values as a compact JSON array, ASCII-escaped (so
    any text, even an unpaired surrogate, has one encoding), in the order of
    ``CONTENT_FIELDS``. The kind is its id, which a rename does not change.
    Migration 0006 backfills with this function: changing it voids every stored hash.
    """
    canonical = json.dumps([kind_id, language, channel, subject, text_body, html_body], separators=(",", ":"))
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


class TemplateVersionQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs) -> list:
        """Insert versions with their content hashes; an upsert (``update_conflicts``) would rewrite one: refused."""
        if kwargs.get("update_conflicts"):
            raise ImmutableVersionError("Template versions are saved once: bulk_create may not update conflicts.")
        objs = list(objs)
        for version in objs:
            version.content_hash = version.compute_content_hash()
        return super().bulk_create(objs, *args, **kwargs)

    def update(self, **kwargs) -> int:
        """Refuse an UPDATE of anything but approval's columns: saved versions are immutable."""
        frozen = sorted(set(kwargs) - APPROVAL_FIELDS)
        if frozen:
            raise ImmutableVersionError(
                f"Template versions are saved once: {', '.join(frozen)} cannot change; save a new version instead."
            )
        return super().update(**kwargs)


class TemplateVersion(models.Model):
    """One version of the text of a kind in one language on one channel.

    Bodies use ``{{ param }}`` placeholders rendered in a sandbox
    (``rendering.py``). Only ``approved`` versions are sent; the newest
    approved version of a (kind, language, channel) wins. A saved version is
    never edited, draft or approved, by any code path (``save`` and
    ``QuerySet.update`` refuse; the admin is read-only): a change is a new
    version by its writer, approved by someone with the approve permission who
    is not its author, naming the ``content_hash`` they were shown
    (``actions.approve_template``).
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        APPROVED = "approved", "Approved"
        # A second person's "no" (``actions.review_template``): the writer saves a new draft, this one stays as it is.
        CHANGES = "changes", "Changes requested"
        REJECTED = "rejected", "Rejected"

    kind = models.ForeignKey(Kind, on_delete=models.PROTECT, related_name="templates")
    language = models.CharField(max_length=8)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    version = models.PositiveIntegerField(default=1)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    subject = models.CharField(max_length=255, blank=True, help_text="Email only.")
    text_body = models.TextField(help_text="Plain text; the SMS/push text and the email's text part.")
    html_body = models.TextField(blank=True, help_text="Email only: the HTML part's body.")
    content_hash = models.CharField(
        max_length=64, editable=False, help_text="SHA-256 of kind, language, channel, subject and bodies."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = TemplateVersionQuerySet.as_manager()

    class Meta:
        ordering = ["kind__name", "language", "channel", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "language", "channel", "version"],
                name="template_version_unique",
            )
        ]
        indexes = [models.Index(fields=["kind", "channel", "status", "language"], name="template_lookup_idx")]
        permissions = [("approve_templateversion", "Can approve template versions (never one's own)")]

    def __str__(self) -> str:
        return f"{self.kind.name}/{self.language}/{self.channel} v{self.version}"

    def save(self, *args, **kwargs) -> None:
        """Insert the version with its content hash; saving a stored one again may change nothing.

        Raises ``ImmutableVersionError`` naming the fields that differ from the stored row.
        """
        self.content_hash = self.compute_content_hash()
        if self.pk is not None:  # a loaded row, or a new object given a stored row's pk (Django would UPDATE it)
            self._refuse_changes()
        super().save(*args, **kwargs)

    def compute_content_hash(self) -> str:
        """``content_hash`` of this version's current field values (saved or not)."""
        return content_hash(*(getattr(self, name) for name in CONTENT_FIELDS))

    def _refuse_changes(self) -> None:
        # content_hash follows from the content (set in save), so the content fields name the change.
        names = [field.attname for field in self._meta.concrete_fields if field.attname != "content_hash"]
        stored = type(self).objects.filter(pk=self.pk).values(*names).first()
        changed = [name.removesuffix("_id") for name, value in (stored or {}).items() if getattr(self, name) != value]
        if changed:
            raise ImmutableVersionError(
                f"{self} is saved: {', '.join(changed)} cannot change; save a new version instead."
            )

    def clean(self) -> None:
        from backend.notifications.rendering import message_text_problem

        errors = {part: message_text_problem(getattr(self, part)) for part in ("subject", "text_body", "html_body")}
        errors = {part: problem for part, problem in errors.items() if problem}
        if errors:
            raise ValidationError(errors)
