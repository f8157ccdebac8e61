import hashlib
import secrets

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

KEY_PREFIX = "ntf_"
# The highest rate a client may be given, notifications a second: far above what one platform sends.
MAX_RATE = 1_000_000

# A service's name is read by people in the admin, logs and audit rows: letters that look alike (Cyrillic
# "о" for "o"), zero-width or bidi control characters and case would let two clients read as one. Lowercase
# only, so that uniqueness is the plain UNIQUE, whatever the database's collation folds (Turkish "I").
NAME_PATTERN = r"\A[a-z0-9][a-z0-9._-]*\Z"
NAME_RULE = RegexValidator(
    NAME_PATTERN,
    "A client's name is lowercase ASCII letters, digits, '.', '_' and '-', starting with a letter or digit "
    "(e.g. orders).",
    code="invalid_name",
)


def hash_api_key(key: str) -> str:
    """SHA-256 hex digest of an API key.

    Keys carry 256 bits of randomness, so a fast hash is safe here (unlike
    passwords) and lets the key be looked up by an indexed equality.
    """
    return hashlib.sha256(key.encode()).hexdigest()


class ApiClient(models.Model):
    """A backend service allowed to call the API. Only the key's hash is stored.

    ``name`` follows ``NAME_RULE`` (lowercase ASCII, so ``Orders`` or a lookalike cannot sit beside ``orders``),
    checked by the database too (``api_client_name_rule``), so a row written around the model's validation (a
    shell, a script) cannot bring a case twin back.
    """

    name = models.CharField(max_length=100, unique=True, validators=[NAME_RULE])
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    key_hint = models.CharField(
        max_length=12, editable=False, help_text="First characters of the key, to recognise it."
    )
    is_active = models.BooleanField(default=True)
    reads_all_notifications = models.BooleanField(
        default=False,
        help_text="May list every client's notifications (GET /api/v1/notifications), not only its own: for a "
        "support or audit service.",
    )
    every_kind = models.BooleanField(
        default=True,
        help_text="May send every kind, present and future. Untick it to allow only the kinds chosen below.",
    )
    allowed_kinds = models.ManyToManyField(
        "notifications.Kind",
        blank=True,
        related_name="+",
        help_text="The kinds it may send when it may not send every kind: single, batch and campaign sends alike. "
        "A shop's service sending password resets, say, is refused.",
    )
    rate_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_RATE)],
        help_text="Notifications a second it may submit, single and batch sends together (a token bucket shared "
        "by every web process). Empty: NOTIFY_API_CLIENT_RATE.",
    )
    may_erase = models.BooleanField(
        default=False,
        help_text="May erase a user's record (DELETE /api/v1/users/{id}): every client's notifications to them go "
        "too. For the service that handles the company's erasure requests only.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["name"]
        verbose_name = "API client"
        # \A and \Z mean start and end of the text in PostgreSQL's regular expressions and in Python's, which
        # Django's REGEXP runs on SQLite: "$" would let a trailing newline through in Python.
        constraints = [
            models.CheckConstraint(condition=models.Q(name__regex=NAME_PATTERN), name="api_client_name_rule")
        ]

    def __str__(self) -> str:
        return self.name

    @classmethod
    def issue(cls, name: str) -> tuple["ApiClient", str]:
        """Create a client and return it with its key, which is shown this once only.

        Raises ``ValidationError`` when ``name`` breaks ``NAME_RULE`` or another client has it.
        """
        client = cls(name=name)
        client.full_clean(exclude=["key_hash", "key_hint"])
        key = client.set_new_key()
        client.save()
        return client, key

    def kind_refusal(self, kind) -> str | None:
        """Why this client may not send ``kind`` (a ``Kind``), or None when it may.

        A client that may not send every kind reads its ``allowed_kinds`` once per instance: the API's
        key cache (``api.auth``) keeps an instance a few seconds, so a send pays no query for it.
        """
        if self.every_kind:
            return None
        allowed = self.__dict__.get("_allowed_kind_ids")
        if allowed is None:
            allowed = self._allowed_kind_ids = frozenset(self.allowed_kinds.values_list("pk", flat=True))
        if kind.pk in allowed:
            return None
        return f"this API client may not send {kind.name}: ask an administrator to add it to the client's kinds"

    def set_new_key(self) -> str:
        """Give this client (unsaved) a new key's hash and hint; return the key: ``ntf_`` and 256 random bits."""
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        self.key_hash, self.key_hint = hash_api_key(key), key[:10]
        return key

    def rotate_key(self) -> str:
        """Give the client a new key and return it (shown this once only); the old key stops working.

        The client stays the same row: its notifications, its idempotency scope (``client:<id>``, so a
        retry of a request sent before the rotation is still answered as a duplicate) and its settings.
        Web processes other than this one honour the old key for at most ``auth.KEY_CACHE_SECONDS``.
        """
        key = self.set_new_key()
        self.save(update_fields=["key_hash", "key_hint"])
        return key
