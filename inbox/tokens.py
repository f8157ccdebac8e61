"""Signed credentials of end users, who have no account here.

* **Inbox tokens** (``issue`` / ``verify``): short-lived, handed by the calling
  service's backend to its page (``POST /api/v1/users/{id}/inbox-token``);
  they open ``/ws/inbox/?token=…`` and the HTTP fallback of that one user.
* **Page links** (``page_link`` / ``user_for_link``): long-lived, for the
  inbox page of the demo end user (``manage.py inbox_link``).

Both are ``django.core.signing`` values (HMAC-SHA256 with ``SECRET_KEY``, a
timestamp, a salt per purpose), so one can never stand in for the other.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.utils import timezone

TOKEN_SALT = "inbox.token"
LINK_SALT = "inbox.link"


class InvalidToken(Exception):
    """Not a token of ours: malformed, tampered with, or signed for another purpose."""


class ExpiredToken(InvalidToken):
    """A genuine token past its lifetime: ask for a new one."""


@dataclass(frozen=True)
class Token:
    value: str
    expires_at: datetime
    expires_in: int  # seconds


def issue(user_id: str) -> Token:
    """A token for ``user_id`` valid ``INBOX["TOKEN_TTL"]`` seconds (default 900) from now."""
    ttl = settings.INBOX["TOKEN_TTL"]
    value = signing.dumps({"u": user_id}, salt=TOKEN_SALT)
    return Token(value=value, expires_at=timezone.now() + timedelta(seconds=ttl), expires_in=ttl)


def _load(value: str, salt: str, max_age: int) -> str:
    try:
        data = signing.loads(value, salt=salt, max_age=max_age)
    except signing.SignatureExpired as exc:
        raise ExpiredToken(str(exc)) from None
    except signing.BadSignature as exc:
        raise InvalidToken(str(exc)) from None
    user_id = data.get("u") if isinstance(data, dict) else None
    if not isinstance(user_id, str) or not user_id:
        raise InvalidToken("no user in token")
    return user_id


def verify(value: str) -> str:
    """The user id an inbox token was issued for; raises ``ExpiredToken`` or ``InvalidToken``."""
    return _load(value, TOKEN_SALT, settings.INBOX["TOKEN_TTL"])


def page_link(user_id: str) -> str:
    """The signed path segment of ``user_id``'s inbox page (valid ``INBOX["LINK_TTL"]`` seconds)."""
    return signing.dumps({"u": user_id}, salt=LINK_SALT)


def user_for_link(value: str) -> str:
    """The user id of a page link; raises ``ExpiredToken`` or ``InvalidToken``."""
    return _load(value, LINK_SALT, settings.INBOX["LINK_TTL"])
