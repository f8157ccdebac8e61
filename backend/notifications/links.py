"""Signed links for people who have no login: the preference center and one-click unsubscribe.

Tokens are signed with ``SECRET_KEY`` (``django.core.signing``, a salt per
purpose) and carry their issue time: a preference link expires after
``NOTIFY_PREFERENCE_LINK_TTL`` seconds, an unsubscribe link after
``NOTIFY_UNSUBSCRIBE_LINK_TTL`` (mail is read late; RFC 8058 asks that the
link keep working). A tampered token and an expired one are told apart so
the page can say which.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core import signing
from django.urls import reverse

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


def preference_token(user_id: str) -> str:
    return signing.dumps({"u": user_id}, salt=_PREFERENCES, compress=True)


def preference_user(token: str) -> str:
    """The user id a preference-center token was issued for; raises ``LinkError``."""
    return _load(token, _PREFERENCES, settings.NOTIFY["PREFERENCE_LINK_TTL"])["u"]


def preference_url(user_id: str) -> str:
    return absolute(reverse("frontend:preferences", args=[preference_token(user_id)]))


def unsubscribe_token(user_id: str, kind: str, channel: str = "email") -> str:
    return signing.dumps({"u": user_id, "k": kind, "c": channel}, salt=_UNSUBSCRIBE, compress=True)


def unsubscribe_target(token: str) -> Unsubscribe:
    """What an unsubscribe token turns off; raises ``LinkError``."""
    data = _load(token, _UNSUBSCRIBE, settings.NOTIFY["UNSUBSCRIBE_LINK_TTL"])
    return Unsubscribe(user_id=data["u"], kind=data["k"], channel=data["c"])


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
