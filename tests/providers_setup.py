"""A providers file pointing every adapter at the local stub server, and a browser's push subscription."""

import base64
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from backend.stubs.providers_file import stub_providers_toml


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def browser_subscription(stub_url: str, name: str) -> dict:
    """What a browser's PushManager.subscribe() hands over: an endpoint and its ECDH/auth keys (RFC 8291)."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return {"endpoint": f"{stub_url}/push/{name}", "keys": {"p256dh": b64url(public), "auth": b64url(os.urandom(16))}}


def write_providers_file(path: Path, stub_url: str, **overrides: dict) -> Path:
    """Twilio (primary) and Vonage (backup) for SMS, FCM and Web Push for push, all on the stub."""
    path.write_text(stub_providers_toml(stub_url, timeout=2.0, **overrides))
    return path
