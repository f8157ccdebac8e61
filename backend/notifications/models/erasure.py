from django.db import models
from django.utils.crypto import salted_hmac

# The salt of ``Erasure.digest_of``: a digest made for erasures answers nothing else.
_SALT = "notify.erasure.user-id"


class Erasure(models.Model):
    """A user's record erased on request (GDPR Art. 17, the right to erasure): when, by whom, what went.

    It never says who: the user id is kept only as ``user_id_digest``, an HMAC-SHA256 under the
    project's ``SECRET_KEY``, so "was u-123 erased?" can be answered (``digest_of``) by someone who
    already knows the id, and the table names nobody to anyone else. Rotating ``SECRET_KEY`` ends
    such answers for the rows before it. The counts are what the erasure deleted.
    """

    user_id_digest = models.CharField(max_length=64, db_index=True, editable=False)
    requested_by = models.CharField(
        max_length=150, help_text="The API client that asked for it, as its name read then."
    )
    at = models.DateTimeField(auto_now_add=True)
    notifications = models.PositiveIntegerField(default=0)
    devices = models.PositiveIntegerField(default=0)
    preferences = models.PositiveIntegerField(default=0)
    inbox_messages = models.PositiveIntegerField(default=0)
    segment_memberships = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"erasure of {self.user_id_digest[:12]}… at {self.at:%Y-%m-%d %H:%M}"

    @staticmethod
    def digest_of(user_id: str) -> str:
        """The ``user_id_digest`` an erasure of ``user_id`` stored (64 hex characters)."""
        return salted_hmac(_SALT, user_id, algorithm="sha256").hexdigest()
