"""Vonage's SMS delivery receipts (DLRs): which configured account signed one, and what it says.

A DLR carries ``messageId``, ``status`` (delivered, expired, failed, rejected, accepted, buffered,
unknown) and ``err-code`` (https://developer.vonage.com/en/messaging/sms/guides/delivery-receipts),
as a GET query, a POST form or a POST JSON body (the account's webhook setting). It is signed one
of two ways, with the account's signature secret (providers file options ``signature_secret`` and
``signature_method``):

* a ``sig`` parameter (SMS API signed webhooks, ``signatures.py``);
* an ``Authorization: Bearer`` JWT signed HS256 with the secret, whose ``payload_hash`` claim is
  the SHA-256 of the body (https://developer.vonage.com/en/messages/concepts/signed-webhooks).
  Only a POST with a body qualifies, and only with the claim: the hash is what ties the token to
  these fields. A token for an empty body (any other signed webhook without one) would otherwise
  vouch for every GET receipt, whatever its query said. The token must also carry ``iat`` and be
  at most ``JWT_MAX_AGE`` seconds old: a token seen once (a log, a proxy) does not sign for ever.

Error codes: https://api.support.vonage.com/hc/en-us/articles/204014733 (SMS delivery error codes).
"""

import hashlib
import hmac
import time
from collections.abc import Mapping

import jwt

from backend.notifications.models import Receipt
from backend.notifications.providers.config import ProviderConfig, providers_config
from backend.notifications.receipts.apply import ProviderReceipt, ReceiptError
from backend.notifications.receipts.signatures import VONAGE_METHODS, vonage_signature_matches

_OUTCOMES = {
    "delivered": Receipt.Outcome.DELIVERED,
    "expired": Receipt.Outcome.UNDELIVERED,
    "failed": Receipt.Outcome.UNDELIVERED,
    "rejected": Receipt.Outcome.UNDELIVERED,
}  # accepted, buffered and unknown: still on its way
MEANINGS = {
    "0": "Delivered",
    "1": "Unknown",
    "2": "Absent subscriber - temporary",
    "3": "Absent subscriber - permanent",
    "4": "Call barred by user",
    "5": "Portability error",
    "6": "Anti-spam rejection",
    "7": "Handset busy",
    "8": "Network error",
    "9": "Illegal number",
    "10": "Illegal message",
    "11": "Unroutable",
    "12": "Destination unreachable",
    "13": "Subscriber age restriction",
    "14": "Number blocked by carrier",
    "15": "Prepaid insufficient funds",
    "50": "Entity filter",
    "51": "Header filter",
    "52": "Content filter",
    "53": "Consent filter",
    "54": "Regulation error",
    "99": "General error",
}
# Vonage: "number is no longer active and should be removed" (3), "permanent error … should be removed"
# (4). Anti-spam, carrier blocks and the filters (6, 14, 50-54) judge our sender or content, not the number.
DEAD_NUMBER = frozenset({"3", "4"})


# Seconds a Bearer token is accepted after its ``iat``; and the clock difference tolerated either way.
JWT_MAX_AGE = 300
JWT_LEEWAY = 60


def _signers() -> list[ProviderConfig]:
    """Vonage providers with a signature secret and a method Vonage has (a typo signs nothing)."""
    return [
        config
        for config in providers_config().providers.values()
        if config.type == "vonage"
        and config.option("signature_secret")
        and config.option("signature_method", "md5hash") in VONAGE_METHODS
    ]


def signing_providers(params: Mapping[str, object], authorization: str, body: bytes) -> list[str]:
    """The configured Vonage providers whose signature secret signed this receipt (usually one, or none).

    ``authorization`` is the Authorization header ("" when absent) and ``body`` the raw body (b"" for
    a GET); with a Bearer token the JWT decides, and signs nothing without a body, else the ``sig``
    parameter.
    """
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token:
        if not body:
            return []
        return [config.name for config in _signers() if _jwt_matches(token.strip(), config, body)]
    return [
        config.name
        for config in _signers()
        if vonage_signature_matches(
            params, str(config.option("signature_secret")), str(config.option("signature_method", "md5hash"))
        )
    ]


def _jwt_matches(token: str, config: ProviderConfig, body: bytes) -> bool:
    """Whether ``token`` is HS256 with ``config``'s secret, issued at most ``JWT_MAX_AGE`` s ago, for ``body``."""
    try:
        claims = jwt.decode(
            token, str(config.option("signature_secret")), algorithms=["HS256"],
            options={"require": ["iat", "payload_hash"]}, leeway=JWT_LEEWAY,
        )  # fmt: skip
    except jwt.PyJWTError:
        return False
    if not isinstance(claims["iat"], int | float) or time.time() - claims["iat"] > JWT_MAX_AGE + JWT_LEEWAY:
        return False
    expected = claims["payload_hash"]
    return hmac.compare_digest(
        str(expected).lower().encode("utf-8", "replace"), hashlib.sha256(body).hexdigest().encode()
    )


def read(params: Mapping[str, object]) -> ProviderReceipt:
    """One DLR's fields as a ``ProviderReceipt``; ReceiptError when ``messageId`` or ``status`` is missing."""
    reference, status = str(params.get("messageId", "")).strip(), str(params.get("status", "")).strip().lower()
    if not reference or not status:
        raise ReceiptError("A Vonage delivery receipt names messageId and status.")
    code = str(params.get("err-code", "")).strip()
    outcome = _OUTCOMES.get(status, Receipt.Outcome.SENT)
    return ProviderReceipt(
        provider_ref=reference, status=status, outcome=outcome, code=code, meaning=MEANINGS.get(code, ""),
        address_dead=outcome == Receipt.Outcome.UNDELIVERED and code in DEAD_NUMBER,
    )  # fmt: skip
