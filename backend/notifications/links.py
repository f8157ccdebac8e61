"""Signed links for people who have no login: the preference center and one-click unsubscribe.

Preference-center tokens are signed with ``SECRET_KEY`` (``django.core.signing``,
a salt per purpose) and carry their issue time: they expire after
``NOTIFY_PREFERENCE_LINK_TTL`` seconds. A tampered token and an expired one are
told apart so the page can say which.

Unsubscribe tokens are opaque: a random value stored with what it turns off
(``UnsubscribeToken``, one per recipient × kind × channel), so a mail's links
say nothing about the user id however they are decoded. They do not expire (RFC
8058 asks that the link keep working; mail is read late). Signed unsubscribe
tokens of older mail (they hold the user id) are still honoured until
``NOTIFY_UNSUBSCRIBE_LINK_TTL`` after they were issued, then refused as expired;
no new ones are made.
"""

import secrets
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core import signing
from django.db import IntegrityError, transaction
from django.urls import reverse

from backend.notifications.models import Recipient, UnsubscribeToken

_PREFERENCES = "notify.preference-link"
_UNSUBSCRIBE = "notify.unsubscribe"


class LinkError(Exception):
    """A link that cannot be used; ``expired`` tells an old link from a forged or damaged one."""

    def __init__(self, message: str, expired: bool):
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class Unsubscribe:
    """What a one-click unsubscribe link turns off: one kind on one channel for one user."""

    user_id: str
    kind: str
    channel: str


def absolute(path: str) -> str:
    """``NOTIFY_PUBLIC_URL`` + path: links in mail must not depend on the request that made them."""
    return settings.NOTIFY["PUBLIC_URL"].rstrip("/") + path


def _load(token: str, salt: str, max_age: int) -> dict:
    try:
        return signing.loads(token, salt=salt, max_age=max_age)
    except signing.SignatureExpired:
        raise LinkError("This link has expired.", expired=True) from None
    except signing.BadSignature:
        raise LinkError("This link is not valid: it may have been copied incompletely.", expired=False) from None


# Seconds by which the clocks of two processes (two hosts) may differ, for ``issued_before``.
CLOCK_SKEW = 5


def issued_before(token: str, created_at: datetime) -> bool:
    """True when the signed ``token`` was made in a second before ``created_at``: it names an earlier record.

    A user id may be erased and created again (``erasure.py``): a link or token signed for the old
    record names the same id, and must not open the new one. Django's signed values carry the
    second they were made (``TimestampSigner``, base 62); a token verified already is read here, and
    an opaque one (an unsubscribe token) is never "before". ``CLOCK_SKEW`` seconds are forgiven: the
    process that signs may run a little behind the one that created the record, and a new person's
    first link must work; an old record's link is older than that by the erasure and the re-creation.
    """
    parts = token.rsplit(":", 2)
    if len(parts) != 3:
        return False
    try:
        issued = signing.b62_decode(parts[1])
    except ValueError:
        return False
    return issued < created_at.timestamp() - CLOCK_SKEW


def preference_token(user_id: str) -> str:
    return signing.dumps({"u": user_id}, salt=_PREFERENCES, compress=True)


def preference_user(token: str) -> str:
    """The user id a preference-center token was issued for; raises ``LinkError``."""
    return _load(token, _PREFERENCES, settings.NOTIFY["PREFERENCE_LINK_TTL"])["u"]


def preference_url(user_id: str) -> str:
    return absolute(reverse("frontend:preferences", args=[preference_token(user_id)]))


def unsubscribe_token(user_id: str, kind: str, channel: str = "email") -> str:
    """The recipient's opaque token for ``kind`` on ``channel``, made on first use; the same one ever after.

    Raises ``Recipient.DoesNotExist`` for an unknown user id.
    """
    recipient = Recipient.objects.get(user_id=user_id)
    existing = UnsubscribeToken.objects.filter(recipient=recipient, kind=kind, channel=channel).first()
    if existing is not None:
        return existing.token
    try:
        with transaction.atomic():
            return UnsubscribeToken.objects.create(
                token=secrets.token_urlsafe(24), recipient=recipient, kind=kind, channel=channel
            ).token
    except IntegrityError:  # a concurrent delivery made it first
        return UnsubscribeToken.objects.get(recipient=recipient, kind=kind, channel=channel).token


def unsubscribe_target(token: str) -> Unsubscribe:
    """What an unsubscribe token turns off; raises ``LinkError``.

    A signed token (it holds ":") is one of older mail, honoured until it expires (module docstring).
    """
    if ":" in token:
        data = _load(token, _UNSUBSCRIBE, settings.NOTIFY["UNSUBSCRIBE_LINK_TTL"])
        return Unsubscribe(user_id=data["u"], kind=data["k"], channel=data["c"])
    row = UnsubscribeToken.objects.filter(token=token).values_list("recipient__user_id", "kind", "channel").first()
    if row is None:
        raise LinkError("This link is not valid: it may have been copied incompletely.", expired=False)
    return Unsubscribe(*row)


def unsubscribe_url(user_id: str, kind: str) -> str:
    """The https page behind the one-click link (also the footer's unsubscribe link)."""
    return absolute(reverse("frontend:unsubscribe", args=[unsubscribe_token(user_id, kind)]))


def unsubscribe_headers(user_id: str, kind: str) -> dict[str, str]:
    """``List-Unsubscribe`` (https and mailto) and ``List-Unsubscribe-Post`` for marketing email (RFC 8058 §3.1)."""
    token = unsubscribe_token(user_id, kind)
    https = absolute(reverse("frontend:unsubscribe", args=[token]))
    mailto = f"mailto:{settings.NOTIFY['UNSUBSCRIBE_MAILTO']}?subject=unsubscribe%20{token}"
    return {"List-Unsubscribe": f"<{https}>, <{mailto}>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click"}


def user_of_expired(token: str) -> str | None:
    """The user id inside a genuine but expired preference or unsubscribe token, else None.

    Only to answer an expired link in its owner's language: the signature is
    still checked, the age is not, so never use it to grant anything.
    """
    for salt in (_PREFERENCES, _UNSUBSCRIBE):
        try:
            data = signing.loads(token, salt=salt)
        except signing.BadSignature:
            continue
        return data.get("u") if isinstance(data, dict) else None
    return None
