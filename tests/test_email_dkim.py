"""DKIM: a marketing mail sent through real SMTP verifies with dkimpy against the public key."""

import base64
import re

import dkim
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from backend import checks
from backend.notifications.delivery import dispatch
from backend.notifications.models import Notification

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def dkim_key(settings) -> bytes:
    """A fresh 2048-bit key in the settings; returns the DNS TXT record of its public half."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    settings.NOTIFY = {**settings.NOTIFY, "DKIM": {"DOMAIN": "example.com", "SELECTOR": "notify2026",
                                                   "PRIVATE_KEY": pem.decode()}}  # fmt: skip
    public = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return b"v=DKIM1; k=rsa; p=" + base64.b64encode(public)


def _raw_mail(send, sink, kind: str, params: dict) -> bytes:
    response = send({"user_id": "u-ar-1", "kind": kind, "channel": "email", "params": params}, key=f"{kind}-dkim")
    assert response.status_code == 202, response.json()
    dispatch.deliver(response.json()["id"])
    [path] = sorted(sink.folder.glob("*.eml"))
    return path.read_bytes()


def test_a_marketing_mail_is_signed_over_both_unsubscribe_headers(send, smtp_sink, dkim_key):
    raw = _raw_mail(send, smtp_sink, "promo", {"percent": "20"})
    dns = {b"notify2026._domainkey.example.com.": dkim_key}
    assert dkim.verify(raw, dnsfunc=lambda name, timeout=5: dns.get(name)) is True

    header = re.search(rb"^DKIM-Signature:(.*?)\r?\n(?=\S)", raw, re.MULTILINE | re.DOTALL).group(1)
    tags = dict(part.strip().split(b"=", 1) for part in re.sub(rb"\s+", b"", header).split(b";") if part)
    signed = {name.lower() for name in tags[b"h"].split(b":")}
    assert {b"list-unsubscribe", b"list-unsubscribe-post", b"from", b"subject", b"date", b"message-id"} <= signed
    assert (tags[b"d"], tags[b"s"], tags[b"a"], tags[b"c"]) == (b"example.com", b"notify2026", b"rsa-sha256",
                                                                  b"relaxed/relaxed")  # fmt: skip


def test_a_changed_unsubscribe_header_fails_verification(send, smtp_sink, dkim_key):
    raw = _raw_mail(send, smtp_sink, "promo", {"percent": "20"})
    forged = re.sub(rb"List-Unsubscribe:\s*<[^>]+>", b"List-Unsubscribe: <https://evil.example/u>", raw)
    assert forged != raw
    dns = {b"notify2026._domainkey.example.com.": dkim_key}
    assert dkim.verify(forged, dnsfunc=lambda name, timeout=5: dns.get(name)) is False


def test_without_a_key_mail_goes_unsigned(send, smtp_sink):
    raw = _raw_mail(send, smtp_sink, "shipped", {"order": "5012"})
    assert b"DKIM-Signature" not in raw
    assert Notification.objects.get(idempotency_key="shipped-dkim").state == "sent"


@pytest.mark.parametrize(
    ("dkim", "message"),
    [
        ({"DOMAIN": "example.com", "SELECTOR": "", "PRIVATE_KEY": ""},
         "DKIM needs all of NOTIFY_DKIM_DOMAIN, NOTIFY_DKIM_SELECTOR and NOTIFY_DKIM_PRIVATE_KEY(_FILE)."),
        ({"DOMAIN": "example.com", "SELECTOR": "s1", "PRIVATE_KEY": "not a key"},
         "DKIM cannot sign with NOTIFY_DKIM_PRIVATE_KEY: "),
    ],
)  # fmt: skip
def test_a_half_configured_or_unusable_dkim_stops_the_checks(settings, dkim, message):
    settings.NOTIFY = {**settings.NOTIFY, "DKIM": dkim}
    [error] = checks.check_dkim(None)
    assert (error.id, error.msg[: len(message)]) == ("notify.E004", message)


def test_a_working_key_and_no_dkim_at_all_pass_the_checks(settings, dkim_key):
    assert checks.check_dkim(None) == []
    settings.NOTIFY = {**settings.NOTIFY, "DKIM": {"DOMAIN": "", "SELECTOR": "", "PRIVATE_KEY": ""}}
    assert checks.check_dkim(None) == []
