"""Secret params (the OTP code): the provider receives them; staff pages, API reads, stored text and logs see ••••••.

The code is letters and digits outside a-f (K7QX9Z) so that no id, timestamp or hash on a page can
contain it by chance: a test that finds it has found a leak.
"""

import hashlib
import json
import logging
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.utils import timezone
from django.utils.crypto import salted_hmac

from backend.notifications import actions, idempotency, masking, rendering
from backend.notifications.delivery import dispatch
from backend.notifications.models import (
    Attempt,
    Category,
    Channel,
    DeadLetter,
    Kind,
    Notification,
    OverLimit,
    Recipient,
    State,
    TemplateVersion,
)
from backend.notifications.providers.base import ProviderError
from backend.notifications.providers.twilio import TwilioProvider
from backend.notifications.providers.vonage import VonageProvider

pytestmark = pytest.mark.usefixtures("demo_data")

CODE = "K7QX9Z"
MASK = "••••••"
OTP = {"user_id": "u-ar-1", "kind": "otp", "params": {"code": CODE}}
MASKED_AR = f"رمز التحقق الخاص بك هو {MASK}. تنتهي صلاحيته خلال 5 دقائق."


@pytest.fixture
def support_agent():
    return User.objects.get(username="support")


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    return caplog


def staff_views(client, user: User, notification_id: str) -> dict[str, str]:
    """What a staff member sees of a notification: the home page and the admin's list and change pages."""
    client.force_login(user)
    pages = {
        "home": "/",
        "admin list": "/admin/notifications/notification/",
        "admin search": f"/admin/notifications/notification/?q={notification_id}",
        "admin change": f"/admin/notifications/notification/{notification_id}/change/",
    }
    seen = {}
    for name, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        seen[name] = response.content.decode()
    return seen


def test_the_code_reaches_the_provider_and_no_one_else(send, api, client, support_agent, stub_providers, logs):
    accepted = send(OTP, key="login-u-ar-1-1")
    notification_id = accepted.json()["id"]
    assert accepted.status_code == 202
    assert accepted.json()["params"] == {"code": MASK}
    assert accepted.json()["preview"] == MASKED_AR

    # Waiting in the queue, the row keeps the code: the worker renders the message from it.
    assert Notification.objects.get(pk=notification_id).params == {"code": CODE}
    queued = staff_views(client, support_agent, notification_id)
    queued["api"] = api.get(f"/api/v1/notifications/{notification_id}").content.decode()
    assert MASKED_AR in queued["home"] and MASKED_AR in queued["admin list"]
    assert MASK in queued["admin change"]
    assert [name for name, page in queued.items() if CODE in page] == []

    dispatch.deliver(notification_id)

    [message] = stub_providers.state.messages
    assert message["text"] == f"رمز التحقق الخاص بك هو {CODE}. تنتهي صلاحيته خلال 5 دقائق."
    read = api.get(f"/api/v1/notifications/{notification_id}").json()
    assert (read["state"], read["params"], read["preview"]) == ("sent", {"code": MASK}, MASKED_AR)
    sent = staff_views(client, support_agent, notification_id)
    assert [name for name, page in sent.items() if CODE in page] == []
    # Sent, nothing renders it again: the code is not kept at rest either.
    stored = Notification.objects.get(pk=notification_id)
    assert (stored.params, stored.preview) == ({"code": MASK}, MASKED_AR)
    assert CODE not in logs.text


def test_a_duplicate_request_is_answered_masked_too(send):
    send(OTP, key="login-u-ar-1-1")
    again = send(OTP, key="login-u-ar-1-1")
    assert again.status_code == 200
    assert CODE not in again.content.decode()


def test_a_provider_error_quoting_the_message_is_masked_everywhere_it_is_kept(
    send, stub_providers, settings, monkeypatch, logs
):
    settings.NOTIFY = {**settings.NOTIFY, "MAX_ATTEMPTS": 1}

    def echo(self, message):
        raise ProviderError(f"{self.name} answered HTTP 503: could not send {message.text!r}", permanent=False)

    monkeypatch.setattr(TwilioProvider, "send", echo)
    monkeypatch.setattr(VonageProvider, "send", echo)
    notification_id = send(OTP, key="login-u-ar-1-1").json()["id"]
    dispatch.deliver(notification_id)

    notification = Notification.objects.get(pk=notification_id)
    assert (notification.state, notification.reason) == (State.FAILED, "attempts-exhausted")
    assert notification.last_error == f"vonage answered HTTP 503: could not send '{MASKED_AR}'"
    assert list(Attempt.objects.values_list("provider", "error")) == [
        ("twilio", f"twilio answered HTTP 503: could not send '{MASKED_AR}'"),
        ("vonage", f"vonage answered HTTP 503: could not send '{MASKED_AR}'"),
    ]
    letter = DeadLetter.objects.get()
    assert letter.last_error == notification.last_error
    assert "failing over" in logs.text
    assert CODE not in logs.text
    # A dead letter may be replayed within the validity window: it keeps the code to render it again.
    assert notification.params == {"code": CODE}

    monkeypatch.undo()
    assert actions.replay(letter, by="support") == "replayed"
    dispatch.deliver(notification_id)
    assert [m["text"] for m in stub_providers.state.messages] == [
        f"رمز التحقق الخاص بك هو {CODE}. تنتهي صلاحيته خلال 5 دقائق."
    ]
    notification.refresh_from_db()
    assert (notification.state, notification.params) == (State.SENT, {"code": MASK})


def test_a_permanent_error_quoting_the_code_is_masked_on_the_disabled_number(send, stub_providers, monkeypatch):
    def refuse(self, message):
        raise ProviderError(f"21211 invalid 'To' for {message.text}", permanent=True, address_invalid=True)

    monkeypatch.setattr(TwilioProvider, "send", refuse)
    notification_id = send(OTP, key="login-u-ar-1-1").json()["id"]
    dispatch.deliver(notification_id)

    notification = Notification.objects.get(pk=notification_id)
    assert (notification.state, notification.reason) == (State.FAILED, "permanent-error")
    assert notification.last_error == f"21211 invalid 'To' for {MASKED_AR}"
    assert notification.params == {"code": MASK}
    recipient = Recipient.objects.get(user_id="u-ar-1")
    assert recipient.phone_disabled_reason == f"21211 invalid 'To' for {MASKED_AR}"


def test_a_provider_crashing_with_the_message_in_its_error_logs_it_masked(send, stub_providers, monkeypatch, logs):
    def crash(self, message):
        raise RuntimeError(f"cannot encode {message.text}")

    monkeypatch.setattr(TwilioProvider, "send", crash)
    monkeypatch.setattr(VonageProvider, "send", crash)
    notification_id = send(OTP, key="login-u-ar-1-1").json()["id"]
    dispatch.deliver(notification_id)

    assert list(Attempt.objects.values_list("error", flat=True)) == [
        f"twilio raised RuntimeError: cannot encode {MASKED_AR}",
        f"vonage raised RuntimeError: cannot encode {MASKED_AR}",
    ]
    assert f"RuntimeError: cannot encode {MASKED_AR}" in logs.text
    assert "Traceback" in logs.text
    assert CODE not in logs.text


def test_an_expired_code_is_not_kept(send, stub_providers):
    notification_id = send(OTP, key="login-u-ar-1-1").json()["id"]
    with time_machine.travel(timezone.now() + timedelta(minutes=6)):
        dispatch.deliver(notification_id)
    notification = Notification.objects.get(pk=notification_id)
    assert (notification.state, notification.params) == (State.EXPIRED, {"code": MASK})
    assert stub_providers.state.messages == []


def test_a_suppressed_code_is_never_stored(send):
    responses = [send({**OTP, "params": {"code": f"{CODE}{n}"}}, key=f"login-{n}") for n in range(4)]
    assert [r.json()["state"] for r in responses] == ["queued"] * 3 + ["suppressed"]
    suppressed = Notification.objects.get(pk=responses[3].json()["id"])
    assert (suppressed.reason, suppressed.params, suppressed.preview) == ("otp-limit", {"code": MASK}, MASKED_AR)


def _voucher_kind() -> Kind:
    """A marketing kind with a secret voucher code, folded into a digest over the rate limit."""
    kind = Kind.objects.create(
        name="voucher", category=Category.MARKETING, channels=[Channel.EMAIL], over_limit=OverLimit.DIGEST,
        params={"voucher": {"example": "AB12", "max_length": 12, "secret": True}},
    )  # fmt: skip
    TemplateVersion.objects.create(
        kind=kind, language="en", channel=Channel.EMAIL, status=TemplateVersion.Status.APPROVED,
        subject="Your voucher {{ voucher }}", text_body="Use {{ voucher }} at checkout.",
    )  # fmt: skip
    return kind


def test_digest_items_carry_the_masked_preview(send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1, "d": 10}}}
    _voucher_kind()
    responses = [
        send({"user_id": "u-en-1", "kind": "voucher", "params": {"voucher": f"{CODE}{n}"}}, key=f"voucher-{n}")
        for n in range(3)
    ]
    assert [r.json()["reason"] for r in responses] == ["", "digested", "digested"]
    [digest] = Notification.objects.filter(kind__name="digest")
    assert digest.params == {"items": [f"Your voucher {MASK}"] * 2, "count": 2}
    assert digest.preview == f"2: Your voucher {MASK} · Your voucher {MASK}"
    assert not Notification.objects.filter(params__voucher__startswith=CODE).exclude(state=State.QUEUED).exists()


def test_the_preview_is_rendered_with_the_mask_not_cut_out_of_the_text():
    kind = Kind(name="pin", params={"code": {"secret": True}, "order": {}})
    version = TemplateVersion(
        kind=kind, language="en", channel=Channel.SMS, text_body="Code {{ code }} for order {{ order }}"
    )
    params = {"code": "5012", "order": "5012"}
    rendered = rendering.render(version, params)
    assert masking.masked_preview(version, kind, params, rendered) == f"Code {MASK} for order 5012"


def test_a_template_that_cannot_render_the_mask_previews_the_mask_alone():
    kind = Kind(name="pin", params={"code": {"secret": True}})
    version = TemplateVersion(kind=kind, language="en", channel=Channel.SMS, text_body="Next: {{ code + 1 }}")
    rendered = rendering.render(version, {"code": 41})
    assert masking.masked_preview(version, kind, {"code": 41}, rendered) == MASK


def test_a_kind_without_secrets_previews_as_rendered():
    kind = Kind(name="shipped2", params={"order": {"max_length": 12}})
    version = TemplateVersion(kind=kind, language="en", channel=Channel.SMS, text_body="Order {{ order }} shipped")
    rendered = rendering.render(version, {"order": "5012"})
    assert masking.masked_preview(version, kind, {"order": "5012"}, rendered) == "Order 5012 shipped"


def test_the_otp_kind_declares_its_code_secret():
    assert masking.secret_names(Kind.objects.get(name="otp")) == {"code"}


def test_the_admin_refuses_a_secret_flag_that_is_not_a_boolean(client):
    client.force_login(User.objects.get(username="admin"))
    response = client.post(
        "/admin/notifications/kind/add/",
        {
            "name": "pin", "category": "security", "priority": "high", "channels": '["sms"]',
            "over_limit": "suppress", "params": '{"code": {"max_length": 8, "secret": "yes"}}',
            "default_language": "en", "validity_seconds": "300",
        },
    )  # fmt: skip
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["params"] == [
        '"code": "secret" must be true or false, as in '
        '{"param": {"example": "5012", "max_length": 10, "secret": false}, ...}'
    ]
    assert not Kind.objects.filter(name="pin").exists()


def _plain_sha256(code: str) -> str:
    """The unkeyed hash of an OTP request for Layla with ``code``, as an attacker holding the row would compute it."""
    payload = {"user_id": "u-ar-1", "kind": "otp", "params": {"code": code}, "channel": None, "priority": None}
    canonical = json.dumps({**payload, "send_at": None}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_the_stored_request_hash_does_not_give_the_code_away(send):
    notification_id = send({**OTP, "params": {"code": "000417"}}, key="login-1").json()["id"]
    stored = Notification.objects.get(pk=notification_id).request_hash
    # Every other field of the request is known to whoever reads the row: only the code is guessed.
    assert [code for code in (f"{n:06d}" for n in range(1000)) if _plain_sha256(code) == stored] == []


def test_duplicates_are_still_recognised_across_a_key_rotation_and_from_older_rows(send, settings):
    first = send(OTP, key="login-1").json()
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    assert send(OTP, key="login-1").json() == {**first, "duplicate": True}
    assert send({**OTP, "params": {"code": "K7QX9Y"}}, key="login-1").status_code == 422

    # Rows stored before hashes were keyed hold the plain SHA-256.
    Notification.objects.filter(pk=first["id"]).update(request_hash=_plain_sha256(CODE))
    assert send(OTP, key="login-1").status_code == 200


@pytest.mark.parametrize("secret", ["first-secret-" + "a" * 40, "second-secret-" + "b" * 40])
@pytest.mark.parametrize(
    "payload",
    [
        {**OTP, "send_at": None},
        {"user_id": "u-fa-1", "kind": "shipped", "params": {"order": "سفارش ۵۰۱۲"}, "send_at": None},
    ],
)
def test_the_request_hash_is_djangos_salted_hmac_under_the_current_secret(payload, secret, settings):
    """Its key is derived once per secret and reused: the hash must stay Django's, whichever secret is current."""
    settings.SECRET_KEY = secret
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = salted_hmac("notify.idempotency.request", canonical, secret=secret, algorithm="sha256").hexdigest()

    assert idempotency.request_hash(payload) == expected
    assert idempotency.same_request(expected, payload)
