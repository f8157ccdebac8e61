"""Push to browsers by Web Push (RFC 8030) with VAPID (RFC 8292), encrypted by pywebpush (RFC 8291).

The endpoint comes from the browser's subscription, so it is checked
against private addresses before any request (providers/http.py). A 201
(or 200/202) is accepted; 404 and 410 mean the subscription is gone
(RFC 8030 §7.3) and the device is disabled; 413 is a payload too large;
429 and 5xx are transient.
Options: ``vapid_private_key`` (PEM or base64url), ``vapid_subject`` (mailto: or https:), ``ttl`` seconds.
"""

import base64
import json

import requests
from cryptography.hazmat.primitives import serialization
from py_vapid import Vapid
from pywebpush import WebPushException, webpush

from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register


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
        http.check_public_url(message.to)
        subscription = {"endpoint": message.to, "keys": message.subscription.get("keys", {})}
        payload = json.dumps(
            {"title": message.subject, "body": message.text, "notification_id": message.notification_id},
            ensure_ascii=False,
        )
        try:
            response = webpush(
                subscription,
                data=payload,
                vapid_private_key=self.config.option("vapid_private_key"),
                vapid_claims={"sub": self.config.option("vapid_subject", "mailto:notify@localhost")},
                ttl=int(self.config.option("ttl", 3600)),
                timeout=self.timeout,
                requests_session=http.session(),
            )
        except WebPushException as exc:
            raise self._error(exc) from exc
        except requests.Timeout as exc:
            raise ProviderError(f"webpush timed out after {self.timeout:g} s", permanent=False) from exc
        except requests.RequestException as exc:
            raise ProviderError(f"webpush connection failed: {exc.__class__.__name__}", permanent=False) from exc
        return response.headers.get("Location", "") or f"webpush:{message.notification_id}"

    def _error(self, exc: WebPushException) -> ProviderError:
        response = exc.response
        status = getattr(response, "status_code", None)
        if response is not None:
            transient = http.transient_for_status("webpush", response)
            if transient is not None:
                return transient
        detail = f"webpush {status}: {exc.message[:200]}"
        return ProviderError(detail, permanent=True, address_invalid=status in (404, 410))
