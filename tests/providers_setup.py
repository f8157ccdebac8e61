"""A providers file pointing every adapter at the local stub server, and a browser's push subscription."""

import base64
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from backend.notifications.providers.webpush import generate_vapid_private_key


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def browser_subscription(stub_url: str, name: str) -> dict:
    """What a browser's PushManager.subscribe() hands over: an endpoint and its ECDH/auth keys (RFC 8291)."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return {"endpoint": f"{stub_url}/push/{name}", "keys": {"p256dh": b64url(public), "auth": b64url(os.urandom(16))}}


def write_providers_file(path: Path, stub_url: str, **overrides: dict) -> Path:
    """Twilio (primary) and Vonage (backup) for SMS, FCM and Web Push for push, all on the stub."""
    providers = {
        "twilio": {"type": "twilio", "base_url": stub_url, "account_sid": "ACtest", "auth_token": "secret",
                   "from": "+15005550006", "timeout": 2.0},
        "vonage": {"type": "vonage", "base_url": stub_url, "api_key": "k", "api_secret": "s", "from": "Notify",
                   "timeout": 2.0},
        "fcm": {"type": "fcm", "base_url": stub_url, "project_id": "demo", "access_token": "t", "timeout": 2.0},
        "webpush": {"type": "webpush", "vapid_private_key": generate_vapid_private_key(),
                    "vapid_subject": "mailto:ops@example.com", "timeout": 2.0},
    }  # fmt: skip
    for name, values in overrides.items():
        providers[name] = {**providers[name], **values}
    lines = ["[channels]", 'sms = ["twilio", "vonage"]', 'push = ["fcm", "webpush"]', ""]
    for name, table in providers.items():
        lines.append(f"[providers.{name}]")
        lines += [f"{key} = {_toml(value)}" for key, value in table.items()]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
