"""Push to browsers by Web Push (RFC 8030) with VAPID (RFC 8292), encrypted by pywebpush (RFC 8291).

The endpoint comes from the browser's subscription, so the request goes
through ``http.post_public``: the host is resolved once, refused when any
address is private, and the connection goes to the address that was checked.
pywebpush only encrypts the payload here (``WebPusher.encode``); its own
sender follows redirects, which would let an endpoint bounce the POST to an
internal address. A 201 (or 200/202) is accepted; a 3xx is never followed
and disables the subscription (RFC 8030 §5 answers a push with 201; a push
service that redirects is not one); 404 and 410 mean the subscription is
gone (RFC 8030 §7.3) and the device is disabled; 413 is a payload too
large; 429 and 5xx are transient.
Options: ``vapid_private_key`` (PEM or base64url), ``vapid_subject`` (mailto: or https:), ``ttl`` seconds.
"""

import base64
import json
import re
import time
from urllib.parse import urlsplit

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from py_vapid import Vapid
from pywebpush import WebPusher, WebPushException

from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

# base64url's alphabet (RFC 4648 §5), padded or not: the Push API's ``toJSON`` leaves the padding out.
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")


def _base64url(text: str) -> bytes:
    """``text`` decoded as strict base64url; ``ValueError`` for any other character (``urlsafe_b64decode`` drops it)."""
    if not _BASE64URL.fullmatch(text):
        raise ValueError(text)
    bare = text.rstrip("=")
    return base64.urlsafe_b64decode(bare + "=" * (-len(bare) % 4))


def subscription_keys(p256dh: str, auth: str) -> dict[str, str]:
    """A subscription's keys checked and written the one way pywebpush reads them: base64url without padding.

    ``p256dh`` is the browser's P-256 public key, an uncompressed point (65 bytes) on the curve; ``auth`` its
    16-byte authentication secret (RFC 8291 §3.2 and §2). Raises ``ValueError`` with the reason a person reads:
    keys ``"x"`` and ``"y"``, or a valid secret with ``"!!!"`` after it, were accepted and every push failed.
    """
    try:
        point, secret = _base64url(p256dh), _base64url(auth)
    except ValueError:
        raise ValueError(
            "keys.p256dh and keys.auth must be base64url, as the browser's subscription gives them."
        ) from None
    problem = "keys.p256dh must be a P-256 public key, an uncompressed point of 65 bytes (RFC 8291)."
    if len(point) != 65 or point[0] != 4:
        raise ValueError(problem)
    try:
        ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)  # on the curve
    except ValueError:
        raise ValueError(problem) from None
    if len(secret) != 16:
        raise ValueError(f"keys.auth must be 16 bytes (RFC 8291); it is {len(secret)}.")
    unpadded = {"p256dh": point, "auth": secret}
    return {name: base64.urlsafe_b64encode(raw).rstrip(b"=").decode() for name, raw in unpadded.items()}


def generate_vapid_private_key() -> str:
    """A new VAPID signing key (P-256, RFC 8292 §3.2) as base64url DER, the form ``vapid_private_key`` takes."""
    vapid = Vapid()
    vapid.generate_keys()
    der = vapid.private_key.private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return base64.urlsafe_b64encode(der).rstrip(b"=").decode()


@register
class WebPushProvider(Provider):
    name = "webpush"
    channel = "push"

    def send(self, message: OutboundMessage) -> str:
        subscription = {"endpoint": message.to, "keys": message.subscription.get("keys", {})}
        payload = json.dumps(
            {"title": message.subject, "body": message.text, "notification_id": message.notification_id},
            ensure_ascii=False,
        )
        try:
            body = WebPusher(subscription).encode(payload.encode(), "aes128gcm")["body"]
        except (WebPushException, ValueError) as exc:  # keys missing, not base64url, not a P-256 point (RFC 8291 §3)
            raise ProviderError(f"webpush: bad subscription keys: {exc}", permanent=True) from exc
        headers = {
            **self._vapid_headers(message.to),
            "Content-Encoding": "aes128gcm",
            "TTL": str(int(self.config.option("ttl", 3600))),
        }
        response = http.post_public(message.to, data=body, headers=headers, timeout=self.timeout)
        if response.status_code in (200, 201, 202):
            return response.headers.get("Location", "") or f"webpush:{message.notification_id}"
        raise self._error(response)

    def _vapid_headers(self, endpoint: str) -> dict[str, str]:
        """The ``Authorization: vapid t=…, k=…`` header (RFC 8292 §2-3), for the endpoint's origin, 12 h valid."""
        parts = urlsplit(endpoint)
        claims = {
            "sub": self.config.option("vapid_subject", "mailto:notify@localhost"),
            "aud": f"{parts.scheme}://{parts.netloc}",
            "exp": int(time.time()) + 12 * 3600,
        }
        return Vapid.from_string(private_key=self.config.option("vapid_private_key")).sign(claims)

    def _error(self, response: requests.Response) -> ProviderError:
        transient = http.transient_for_status("webpush", response)
        if transient is not None:
            return transient
        status = response.status_code
        if 300 <= status < 400:
            location = response.headers.get("Location", "")[:200]
            detail = f"webpush {status}: redirect to {location!r} not followed"
            return ProviderError(detail, permanent=True, address_invalid=True)
        detail = f"webpush {status}: {response.reason} {response.text[:200]}".rstrip()
        return ProviderError(detail, permanent=True, address_invalid=status in (404, 410))
