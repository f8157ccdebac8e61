"""Delivery receipts: the Twilio and Vonage webhooks against notifications really sent through the stub.

Each notification is sent by the delivery engine (``dispatch.deliver``) to the stub provider, so it is
``sent`` with the provider's own reference; the receipts are then signed as the providers sign them
(``receipts/signatures.py``, pinned to their SDKs' vectors in test_receipt_signatures.py) and posted
with CSRF checks on, as an outsider would.
"""

import hashlib
import json
import logging
import time
from datetime import UTC, datetime
from urllib.parse import urlencode

import jwt
import pytest
import time_machine
from django.test import Client

from backend.notifications.delivery import dispatch
from backend.notifications.models import Notification, Receipt, Recipient, State, StateChange
from backend.notifications.receipts import vonage
from backend.notifications.receipts.signatures import twilio_signature, vonage_signature
from backend.stubs.provider_server import VONAGE_SIGNATURE
from tests.providers_setup import write_providers_file

pytestmark = pytest.mark.usefixtures("demo_data")

# Where the providers post, as they see it: behind the proxy, not Django's own http://testserver.
PUBLIC = "https://notify.example.com"
TWILIO_URL = f"{PUBLIC}/webhooks/twilio"
FORM = "application/x-www-form-urlencoded"
LAYLA_PHONE = "+966501234567"
SECRET = VONAGE_SIGNATURE[0]
OTHER_SECRET = "another-vonage-signature-secret!"


@pytest.fixture(autouse=True)
def behind_a_proxy(settings):
    settings.NOTIFY = {**settings.NOTIFY, "WEBHOOK_BASE_URL": PUBLIC}


@pytest.fixture
def outside() -> Client:
    """A provider: no login, no CSRF token."""
    return Client(enforce_csrf_checks=True)


def sent_sms(send, stub_url: str, tmp_path, settings, provider: str) -> Notification:
    """An SMS to Layla that ``provider`` (on the stub) accepted: state ``sent`` with its reference."""
    path = write_providers_file(tmp_path / f"{provider}.toml", stub_url, routes={"sms": [provider]})
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    response = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}, "channel": "sms"})
    assert response.status_code == 202, response.json()
    dispatch.deliver(response.json()["id"])
    notification = Notification.objects.get(pk=response.json()["id"])
    assert (notification.state, notification.provider) == (State.SENT, provider)
    return notification


@pytest.fixture
def twilio_sms(send, provider_stub, tmp_path, settings) -> Notification:
    return sent_sms(send, provider_stub.url, tmp_path, settings, "twilio")


@pytest.fixture
def vonage_sms(send, provider_stub, tmp_path, settings) -> Notification:
    return sent_sms(send, provider_stub.url, tmp_path, settings, "vonage")


def twilio_form(notification: Notification, status: str, code: str = "") -> dict[str, str]:
    form = {"MessageSid": notification.provider_ref, "MessageStatus": status, "AccountSid": "ACstub",
            "To": LAYLA_PHONE, "From": "+15005550006", "ApiVersion": "2010-04-01"}  # fmt: skip
    return {**form, "ErrorCode": code} if code else form


def post_twilio(client: Client, form: dict[str, str], token: str = "stub", url: str = TWILIO_URL):
    signature = twilio_signature(token, url, form.items())
    return client.post("/webhooks/twilio", urlencode(form), content_type=FORM, HTTP_X_TWILIO_SIGNATURE=signature)


def vonage_form(notification: Notification, status: str, code: str = "0") -> dict[str, str]:
    return {"messageId": notification.provider_ref, "status": status, "err-code": code, "msisdn": "966501234567",
            "to": "Notify", "api-key": "stub", "timestamp": "1764540000"}  # fmt: skip


def signed(form: dict[str, str], secret: str = SECRET, method: str = "sha256") -> dict[str, str]:
    return {**form, "sig": vonage_signature(form, secret, method)}


def post_vonage(client: Client, form: dict[str, str]):
    return client.post("/webhooks/vonage", urlencode(form), content_type=FORM)


def history(notification: Notification) -> list[tuple[str, str]]:
    return list(StateChange.objects.filter(notification=notification).values_list("from_state", "to_state"))


def state_of(notification: Notification) -> str:
    notification.refresh_from_db()
    return notification.state


# --- Twilio -------------------------------------------------------------------------------------


def test_a_signed_twilio_receipt_moves_sent_to_delivered(outside, twilio_sms):
    response = post_twilio(outside, twilio_form(twilio_sms, "delivered"))

    assert response.status_code == 204
    assert state_of(twilio_sms) == State.DELIVERED
    assert history(twilio_sms)[-1] == (State.SENT, State.DELIVERED)
    receipt = Receipt.objects.get(notification=twilio_sms)
    assert (receipt.provider, receipt.provider_ref, receipt.status, receipt.outcome) == (
        "twilio", twilio_sms.provider_ref, "delivered", "delivered",
    )  # fmt: skip


def test_the_same_twilio_receipt_twice_is_one_row_and_one_transition(outside, twilio_sms):
    form = twilio_form(twilio_sms, "delivered")

    assert [post_twilio(outside, form).status_code for _ in range(2)] == [204, 204]

    assert Receipt.objects.filter(notification=twilio_sms).count() == 1
    assert history(twilio_sms).count((State.SENT, State.DELIVERED)) == 1


@pytest.mark.parametrize(
    "tamper",
    [
        lambda client, form: post_twilio(client, form, token="not-the-auth-token"),
        lambda client, form: post_twilio(client, form, url="http://testserver/webhooks/twilio"),  # not what Twilio saw
        lambda client, form: client.post(
            "/webhooks/twilio", urlencode({**form, "MessageStatus": "undelivered"}), content_type=FORM,
            HTTP_X_TWILIO_SIGNATURE=twilio_signature("stub", TWILIO_URL, form.items()),
        ),
        lambda client, form: client.post("/webhooks/twilio", urlencode(form), content_type=FORM),
    ],
    ids=["other-token", "proxy-url", "changed-field", "no-signature"],
)  # fmt: skip
def test_a_bad_twilio_signature_is_403_and_changes_nothing(outside, twilio_sms, tamper):
    response = tamper(outside, twilio_form(twilio_sms, "delivered"))

    assert response.status_code == 403
    assert response.json() == {
        "error": "bad_signature", "message": "The X-Twilio-Signature header does not sign this request.",
    }  # fmt: skip
    assert state_of(twilio_sms) == State.SENT
    assert not Receipt.objects.exists()


def test_a_late_sent_after_delivered_stays_delivered(outside, twilio_sms):
    post_twilio(outside, twilio_form(twilio_sms, "delivered"))
    response = post_twilio(outside, twilio_form(twilio_sms, "sent"))

    assert response.status_code == 204
    assert state_of(twilio_sms) == State.DELIVERED
    assert list(Receipt.objects.filter(notification=twilio_sms).values_list("status", "outcome")) == [
        ("delivered", "delivered"), ("sent", "sent"),
    ]  # fmt: skip


def test_a_late_undelivered_after_delivered_stays_delivered(outside, twilio_sms):
    post_twilio(outside, twilio_form(twilio_sms, "delivered"))
    post_twilio(outside, twilio_form(twilio_sms, "undelivered", "30003"))

    assert state_of(twilio_sms) == State.DELIVERED
    assert Recipient.objects.get(user_id="u-ar-1").phone_disabled_at is None


def test_an_unreachable_handset_is_undelivered_with_its_meaning_and_disables_the_number(outside, twilio_sms):
    post_twilio(outside, twilio_form(twilio_sms, "sent"))
    post_twilio(outside, twilio_form(twilio_sms, "undelivered", "30003"))

    twilio_sms.refresh_from_db()
    assert (twilio_sms.state, twilio_sms.reason) == (State.UNDELIVERED, "undelivered 30003")
    assert twilio_sms.last_error == "twilio 30003: Unreachable destination handset"
    receipt = Receipt.objects.get(notification=twilio_sms, status="undelivered")
    assert (receipt.code, receipt.meaning) == ("30003", "Unreachable destination handset")
    layla = Recipient.objects.get(user_id="u-ar-1")
    assert (layla.phone_disabled_at is not None, layla.phone_disabled_reason) == (
        True, "twilio 30003: Unreachable destination handset",
    )  # fmt: skip


def test_carrier_filtering_is_undelivered_but_leaves_the_number_alone(outside, twilio_sms):
    post_twilio(outside, twilio_form(twilio_sms, "undelivered", "30007"))

    twilio_sms.refresh_from_db()
    assert (twilio_sms.state, twilio_sms.last_error) == (
        State.UNDELIVERED, "twilio 30007: Message filtered (carrier filtering)",
    )  # fmt: skip
    assert Recipient.objects.get(user_id="u-ar-1").phone_disabled_at is None


def test_an_unknown_reference_is_answered_204_and_logged(outside, twilio_sms, caplog):
    form = {**twilio_form(twilio_sms, "delivered"), "MessageSid": "SMnot-ours"}

    with caplog.at_level(logging.WARNING, logger="backend.notifications.receipts.apply"):
        response = post_twilio(outside, form)

    assert response.status_code == 204
    assert "receipt 'delivered' for unknown twilio reference 'SMnot-ours': ignored" in caplog.messages
    assert (state_of(twilio_sms), Receipt.objects.count()) == (State.SENT, 0)


def test_the_port_twilio_wrote_out_is_accepted(outside, twilio_sms):
    form = twilio_form(twilio_sms, "delivered")
    signature = twilio_signature("stub", "https://notify.example.com:443/webhooks/twilio", form.items())
    response = outside.post("/webhooks/twilio", urlencode(form), content_type=FORM, HTTP_X_TWILIO_SIGNATURE=signature)

    assert (response.status_code, state_of(twilio_sms)) == (204, State.DELIVERED)


# --- Vonage -------------------------------------------------------------------------------------


def test_a_signed_vonage_receipt_moves_sent_to_delivered(outside, vonage_sms):
    response = post_vonage(outside, signed(vonage_form(vonage_sms, "delivered")))

    assert response.status_code == 204
    vonage_sms.refresh_from_db()
    assert (vonage_sms.state, vonage_sms.reason) == (State.DELIVERED, "delivered")
    assert list(Receipt.objects.values_list("provider", "status", "code", "meaning")) == [
        ("vonage", "delivered", "0", "Delivered")
    ]


def test_the_same_vonage_receipt_twice_is_one_row(outside, vonage_sms):
    form = signed(vonage_form(vonage_sms, "delivered"))

    assert [post_vonage(outside, form).status_code for _ in range(2)] == [204, 204]
    assert Receipt.objects.count() == 1
    assert history(vonage_sms).count((State.SENT, State.DELIVERED)) == 1


@pytest.mark.parametrize(
    "form",
    [
        lambda n: signed(vonage_form(n, "delivered"), secret=OTHER_SECRET),
        lambda n: {**signed(vonage_form(n, "failed", "3")), "status": "delivered", "err-code": "0"},
        lambda n: vonage_form(n, "delivered"),
        lambda n: signed(vonage_form(n, "delivered"), method="md5hash"),  # the account signs with sha256
    ],
    ids=["other-secret", "changed-field", "no-signature", "other-method"],
)
def test_a_bad_vonage_signature_is_403_and_changes_nothing(outside, vonage_sms, form):
    response = post_vonage(outside, form(vonage_sms))

    assert response.status_code == 403
    assert response.json()["error"] == "bad_signature"
    assert (state_of(vonage_sms), Receipt.objects.count()) == (State.SENT, 0)


def test_a_late_accepted_after_delivered_stays_delivered(outside, vonage_sms):
    post_vonage(outside, signed(vonage_form(vonage_sms, "delivered")))
    response = post_vonage(outside, signed(vonage_form(vonage_sms, "accepted")))

    assert response.status_code == 204
    assert state_of(vonage_sms) == State.DELIVERED
    assert Receipt.objects.count() == 2


def test_a_vonage_receipt_by_get_counts_too(outside, vonage_sms):
    response = outside.get("/webhooks/vonage", signed(vonage_form(vonage_sms, "delivered")))

    assert (response.status_code, state_of(vonage_sms)) == (204, State.DELIVERED)


def test_an_absent_subscriber_is_undelivered_and_disables_the_number(outside, vonage_sms):
    post_vonage(outside, signed(vonage_form(vonage_sms, "failed", "3")))

    vonage_sms.refresh_from_db()
    assert (vonage_sms.state, vonage_sms.last_error) == (State.UNDELIVERED, "vonage 3: Absent subscriber - permanent")
    assert Recipient.objects.get(user_id="u-ar-1").phone_disabled_reason == "vonage 3: Absent subscriber - permanent"


def test_an_anti_spam_rejection_leaves_the_number_alone(outside, vonage_sms):
    post_vonage(outside, signed(vonage_form(vonage_sms, "rejected", "6")))

    assert state_of(vonage_sms) == State.UNDELIVERED
    assert Recipient.objects.get(user_id="u-ar-1").phone_disabled_at is None


def jwt_token(raw: bytes, secret: str = SECRET, iat: object = ...) -> str:
    """Vonage's Bearer token for a body ``raw``: its SHA-256, and ``iat`` (``...``: now; None: left out)."""
    claims = {"payload_hash": hashlib.sha256(raw).hexdigest()}
    if iat is not None:
        claims["iat"] = int(time.time()) if iat is ... else iat
    return jwt.encode(claims, secret, algorithm="HS256")


def jwt_post(client: Client, body: dict, secret: str = SECRET, hashed: bytes | None = None):
    raw = json.dumps(body).encode()
    token = jwt_token(raw if hashed is None else hashed, secret)
    return client.post("/webhooks/vonage", raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def test_a_vonage_receipt_signed_as_a_jwt_counts(outside, vonage_sms):
    response = jwt_post(outside, vonage_form(vonage_sms, "delivered"))

    assert (response.status_code, state_of(vonage_sms)) == (204, State.DELIVERED)


@pytest.mark.parametrize(
    "kwargs", [{"secret": OTHER_SECRET}, {"hashed": b"another body"}], ids=["other-secret", "other-body"]
)
def test_a_bad_vonage_jwt_is_403(outside, vonage_sms, kwargs):
    response = jwt_post(outside, vonage_form(vonage_sms, "delivered"), **kwargs)

    assert (response.status_code, state_of(vonage_sms)) == (403, State.SENT)


def test_a_jwt_for_an_empty_body_signs_no_get_receipt(outside, vonage_sms):
    # Any signed webhook without a body carries such a token: it must not vouch for a query it never hashed.
    token = jwt_token(b"")
    form = vonage_form(vonage_sms, "failed", "3")
    response = outside.get(f"/webhooks/vonage?{urlencode(form)}", HTTP_AUTHORIZATION=f"Bearer {token}")

    assert (response.status_code, state_of(vonage_sms)) == (403, State.SENT)
    assert Recipient.objects.get(user_id="u-ar-1").phone_disabled_at is None
    assert vonage.signing_providers(form, f"Bearer {token}", b"") == []  # nor for an empty POST


NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("iat", "status"),
    [
        pytest.param(NOON.timestamp() - 360, 204, id="6-minutes-old-within-5-plus-1-of-leeway"),
        pytest.param(NOON.timestamp() - 361, 403, id="older-than-5-minutes-plus-leeway"),
        pytest.param(NOON.timestamp() + 60, 204, id="a-minute-ahead-within-leeway"),
        pytest.param(NOON.timestamp() + 61, 403, id="issued-in-the-future"),
        pytest.param(None, 403, id="no-iat"),
        pytest.param("2026-12-02", 403, id="iat-not-a-number"),
    ],
)
def test_a_vonage_jwt_is_accepted_for_5_minutes_after_it_was_issued(outside, vonage_sms, iat, status):
    raw = json.dumps(vonage_form(vonage_sms, "delivered")).encode()
    with time_machine.travel(NOON, tick=False):
        token = jwt_token(raw, iat=iat)
        response = outside.post("/webhooks/vonage", raw, content_type="application/json",
                                HTTP_AUTHORIZATION=f"Bearer {token}")  # fmt: skip

    assert (response.status_code, state_of(vonage_sms)) == (status, State.DELIVERED if status == 204 else State.SENT)


# --- what anyone on the Internet may send -------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "kwargs", "status"),
    [
        ("/webhooks/twilio", {"data": "MessageSid=%ZZ&&==&\xff", "content_type": FORM}, 403),
        ("/webhooks/twilio", {"data": b"\x00\xff\xfe junk", "content_type": "application/octet-stream"}, 415),
        ("/webhooks/twilio", {"data": "{}", "content_type": "application/json"}, 415),
        ("/webhooks/twilio", {"data": "a=b", "content_type": f"{FORM}; charset=iso-8859-2"}, 415),
        ("/webhooks/twilio", {"data": "x=" + "a" * 70_000, "content_type": FORM}, 413),
        ("/webhooks/vonage", {"data": "{not json", "content_type": "application/json"}, 400),
        ("/webhooks/vonage", {"data": "[1, 2]", "content_type": "application/json"}, 400),
        ("/webhooks/vonage", {"data": '{"messageId": {"a": 1}, "sig": []}', "content_type": "application/json"}, 403),
        ("/webhooks/vonage", {"data": b"\xff\xfe\x00", "content_type": FORM}, 403),
        ("/webhooks/vonage", {"data": "<xml/>", "content_type": "text/xml"}, 400),
        ("/webhooks/vonage", {"data": "[" * 60_000, "content_type": "application/json"}, 400),
        ("/webhooks/vonage", {"data": '{"a":' * 10_000 + "1" + "}" * 10_000, "content_type": "application/json"}, 400),
        ("/webhooks/vonage", {"data": "{}", "content_type": "application/json", "HTTP_AUTHORIZATION": "Bearer x.y.z"},
         403),
        ("/webhooks/vonage", {"data": "{}", "content_type": "application/json", "HTTP_AUTHORIZATION": "Bearer"}, 403),
    ],
)  # fmt: skip
def test_junk_gets_a_clear_4xx_never_a_500(outside, path, kwargs, status):
    response = outside.post(path, **kwargs)

    assert response.status_code == status
    assert Receipt.objects.count() == 0


def test_junk_query_strings_to_vonage_are_403(outside):
    assert outside.get("/webhooks/vonage?messageId=%ff%00&status=&&sig=zz").status_code == 403


def test_twilio_receipts_are_posted(outside):
    assert outside.get("/webhooks/twilio").status_code == 405


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"MessageStatus": "delivered"}, "A Twilio status callback names MessageSid and MessageStatus."),
        ({"MessageSid": "SM1"}, "A Twilio status callback names MessageSid and MessageStatus."),
    ],
)
def test_a_signed_twilio_callback_without_its_fields_is_400(outside, twilio_sms, form, message):
    response = post_twilio(outside, form)

    assert (response.status_code, response.json()["message"]) == (400, message)


def test_a_signed_vonage_receipt_without_its_fields_is_400(outside, vonage_sms):
    response = post_vonage(outside, signed({"status": "delivered", "timestamp": "1764540000"}))

    assert (response.status_code, response.json()["message"]) == (
        400, "A Vonage delivery receipt names messageId and status.",
    )  # fmt: skip


def test_without_a_configured_vonage_secret_every_receipt_is_refused(outside, vonage_sms, provider_stub, tmp_path,
                                                                    settings):  # fmt: skip
    path = write_providers_file(tmp_path / "unsigned.toml", provider_stub.url, vonage={"signature_secret": ""})
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}

    assert post_vonage(outside, signed(vonage_form(vonage_sms, "delivered"), secret="")).status_code == 403


# --- the stub providers post their own receipts (what the demo relies on) -------------------------


def wait_for_state(notification: Notification, state: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while state_of(notification) != state and time.monotonic() < deadline:
        time.sleep(0.05)
    return notification.state


@pytest.mark.parametrize(
    ("provider", "outcome", "final", "statuses"),
    [
        ("twilio", "delivered", State.DELIVERED, ["sent", "delivered"]),
        ("vonage", "delivered", State.DELIVERED, ["accepted", "delivered"]),
        ("twilio", "undelivered:30007", State.UNDELIVERED, ["sent", "undelivered"]),
        ("vonage", "undelivered", State.UNDELIVERED, ["accepted", "failed"]),
    ],
)
def test_the_stub_posts_signed_receipts_that_land_without_a_manual_step(
    send, provider_stub, live_server, tmp_path, settings, provider, outcome, final, statuses
):
    settings.NOTIFY = {**settings.NOTIFY, "WEBHOOK_BASE_URL": live_server.url}
    # Half a second, as a provider's receipt comes after its answer: one posted before the worker has
    # recorded the answer (the provider's reference) would find no notification yet (logged, ignored).
    provider_stub.state.receipts = {"delay": 0.5, "outcome": outcome}
    path = write_providers_file(
        tmp_path / "callbacks.toml", provider_stub.url, routes={"sms": [provider]}, callback_base=live_server.url
    )
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    response = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}, "channel": "sms"})
    dispatch.deliver(response.json()["id"])
    notification = Notification.objects.get(pk=response.json()["id"])

    assert wait_for_state(notification, final) == final, provider_stub.state.posted
    deadline = time.monotonic() + 5
    while len(provider_stub.state.posted) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [p["answer"] for p in provider_stub.state.posted] == [204, 204]
    assert list(Receipt.objects.filter(notification=notification).values_list("status", flat=True)) == statuses
