"""GET/PUT /api/v1/users/{id}/preferences and PUT /api/v1/users/{id}/devices."""

import base64
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from backend.notifications.models import Device, Preference, Recipient

pytestmark = pytest.mark.usefixtures("demo_data")


def test_get_shows_every_kind_with_its_channels_defaulting_on(api):
    body = api.get("/api/v1/users/u-ar-1/preferences").json()
    assert (body["language"], body["time_zone"], body["quiet_hours"]) == ("ar", "Asia/Riyadh", None)
    assert body["kinds"]["promo"] == {
        "category": "marketing", "opt_out_allowed": True, "channels": {"email": True, "push": True, "inapp": True},
    }  # fmt: skip
    assert body["kinds"]["otp"]["opt_out_allowed"] is False
    assert "digest" not in body["kinds"]


def test_an_in_app_promo_is_a_promo_its_user_can_turn_off(api, send):
    """A caller may name a channel outside the kind's routing ones: its users can turn that off too."""
    offer = {"user_id": "u-ar-1", "kind": "promo", "channel": "inapp", "params": {"percent": "20"}}
    assert send(offer, key="offer-1").json()["state"] == "queued"
    response = api.put("/api/v1/users/u-ar-1/preferences", {"channels": {"promo": {"inapp": False}}}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["kinds"]["promo"]["channels"] == {"email": True, "push": True, "inapp": False}
    answer = send(offer, key="offer-2").json()
    assert (answer["state"], answer["reason"]) == ("suppressed", "opted-out")


def test_put_changes_only_what_it_names(api):
    response = api.put(
        "/api/v1/users/u-ar-1/preferences",
        {"quiet_hours": {"start": "22:00", "end": "07:00"}, "channels": {"promo": {"email": False}}},
        format="json",
    )
    assert response.status_code == 200
    body = response.json()
    assert body["quiet_hours"] == {"start": "22:00", "end": "07:00"}
    assert body["kinds"]["promo"]["channels"] == {"email": False, "push": True, "inapp": True}
    assert (body["language"], body["time_zone"]) == ("ar", "Asia/Riyadh")
    assert Preference.objects.get(channel="email").enabled is False

    persian = api.put(
        "/api/v1/users/u-ar-1/preferences", {"quiet_hours": {"start": "۲۳:۰۰", "end": "٠٦:٣٠"}}, format="json"
    )
    assert (persian.status_code, persian.json()["quiet_hours"]) == (200, {"start": "23:00", "end": "06:30"})

    cleared = api.put(
        "/api/v1/users/u-ar-1/preferences", {"quiet_hours": None, "time_zone": "Asia/Tehran"}, format="json"
    )
    assert (cleared.json()["quiet_hours"], cleared.json()["time_zone"]) == (None, "Asia/Tehran")
    assert cleared.json()["kinds"]["promo"]["channels"]["email"] is False


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"channels": {"otp": {"sms": False}}},
         {"channels.otp.sms": ["otp is a security message and cannot be turned off."]}),
        ({"channels": {"promo": {"sms": False}}},
         {"channels.promo.sms": ["promo is not sent by sms; its channels are email, push, inapp."]}),
        ({"channels": {"nope": {"email": False}}}, {"channels.nope": ["Unknown kind 'nope'."]}),
        ({"channels": {"digest": {"email": False}}},
         {"channels.digest.email": ["digest is not a choice of its own: it follows the kinds it gathers."]}),
        ({"quiet_hours": {"start": "22:00", "end": "22:00"}},
         {"quiet_hours.end": ["Must differ from start (use null for no quiet hours)."]}),
        ({"quiet_hours": {"start": "10pm", "end": "07:00"}},
         {"quiet_hours.start": ["Give the time as HH:MM on a 24-hour clock, e.g. 22:00."]}),
        ({"quiet_hours": {"start": 2200, "end": "07:00"}},
         {"quiet_hours.start": ["Give the time as a string, HH:MM."]}),
        ({"quiet_hours": {"start": "22:00", "end": "۲۴:۰۰"}},
         {"quiet_hours.end": ["Give the time as HH:MM on a 24-hour clock, e.g. 22:00."]}),
        ({"time_zone": "Mars/Olympus"},
         {"time_zone": ["Unknown time zone 'Mars/Olympus'; use an IANA name such as Asia/Riyadh."]}),
        ({"colour": "red"}, {"colour": ["Unknown field."]}),
    ],
)  # fmt: skip
def test_bad_preferences_are_a_422_and_change_nothing(api, body, fields):
    response = api.put("/api/v1/users/u-ar-1/preferences", body, format="json")
    assert (response.status_code, response.json()["fields"]) == (422, fields)
    assert not Preference.objects.exists()


def test_unknown_user_is_a_404(api):
    assert api.get("/api/v1/users/nobody/preferences").status_code == 404
    assert api.put("/api/v1/users/nobody/devices", {"platform": "fcm", "token": "t"}, format="json").status_code == 404


def test_a_device_is_registered_and_a_dead_one_revived(api):
    first = api.put("/api/v1/users/u-ar-1/devices", {"platform": "fcm", "token": "tok-1"}, format="json")
    assert (first.status_code, first.json()["token"]) == (201, "tok-1")
    Device.objects.filter(token="tok-1").update(disabled_reason="fcm 404 UNREGISTERED")
    again = api.put("/api/v1/users/u-en-1/devices", {"platform": "fcm", "token": "tok-1"}, format="json")
    assert again.status_code == 200
    device = Device.objects.get(token="tok-1")
    assert (device.recipient.user_id, device.disabled_at, device.disabled_reason) == ("u-en-1", None, "")


def test_a_user_keeps_the_most_recently_seen_devices_and_as_many_disabled(api, settings):
    settings.NOTIFY = {**settings.NOTIFY, "MAX_DEVICES": 3}
    start = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)

    def register(token: str, minute: int) -> int:
        with time_machine.travel(start + timedelta(minutes=minute), tick=False):
            body = {"platform": "fcm", "token": token}
            return api.put("/api/v1/users/u-ar-1/devices", body, format="json").status_code

    demo_phone = Recipient.objects.get(user_id="u-ar-1").devices.get()
    Device.objects.filter(pk=demo_phone.pk).update(last_seen_at=start)
    assert [register(token, minute) for token, minute in [("a", 1), ("b", 2), ("c", 3)]] == [201, 201, 201]
    devices = {d.token: d for d in Device.objects.filter(recipient__user_id="u-ar-1")}
    assert sorted(t for t, d in devices.items() if d.disabled_at is None) == ["a", "b", "c"]
    assert devices[demo_phone.token].disabled_reason == (
        "retired: more than 3 active devices, and this one the least recently seen"
    )
    assert register("a", 4) == 200  # seen again: now the most recent, so b goes next
    assert [register(token, minute) for token, minute in [("d", 5), ("e", 6), ("f", 7)]] == [201, 201, 201]
    active = Device.objects.filter(recipient__user_id="u-ar-1", disabled_at__isnull=True)
    disabled = Device.objects.filter(recipient__user_id="u-ar-1", disabled_at__isnull=False)
    assert sorted(active.values_list("token", flat=True)) == ["d", "e", "f"]
    # b (minute 5), c (6) and a (7) were retired after the demo phone (3): it is deleted, the oldest disabled.
    assert sorted(disabled.values_list("token", flat=True)) == ["a", "b", "c"]


def test_a_web_push_subscription_needs_an_endpoint_and_keys(api):
    ok = api.put(
        "/api/v1/users/u-ar-1/devices",
        {"platform": "webpush", "subscription": {"endpoint": "https://push.example.com/abc", "keys": KEYS}},
        format="json",
    )  # fmt: skip
    assert (ok.status_code, ok.json()["token"]) == (201, "https://push.example.com/abc")
    bad = api.put("/api/v1/users/u-ar-1/devices", {"platform": "webpush", "subscription": {"endpoint": "x"}},
                  format="json")  # fmt: skip
    assert (bad.status_code, bad.json()["fields"]) == (
        422, {"subscription": ["Needs an http(s) endpoint of at most 1024 characters."]},
    )  # fmt: skip
    assert Recipient.objects.get(user_id="u-ar-1").devices.count() == 2  # the demo phone and the browser


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# A browser's subscription keys: its P-256 public key uncompressed (65 bytes) and a 16-byte secret.
_PUBLIC = ec.generate_private_key(ec.SECP256R1()).public_key()
KEYS = {
    "p256dh": _b64url(_PUBLIC.public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)),
    "auth": _b64url(b"s" * 16),
}
_NOT_BASE64 = "keys.p256dh and keys.auth must be base64url, as the browser's subscription gives them."
_NOT_A_POINT = "keys.p256dh must be a P-256 public key, an uncompressed point of 65 bytes (RFC 8291)."


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"p256dh": "x", "auth": "y"}, _NOT_BASE64),
        ({**KEYS, "p256dh": "BPk"}, _NOT_A_POINT),
        ({**KEYS, "p256dh": _b64url(_PUBLIC.public_bytes(Encoding.X962, PublicFormat.CompressedPoint))}, _NOT_A_POINT),
        ({**KEYS, "p256dh": _b64url(b"\x04" + b"\x01" * 64)}, _NOT_A_POINT),  # 65 bytes, not on the curve
        ({**KEYS, "auth": _b64url(b"s" * 8)}, "keys.auth must be 16 bytes (RFC 8291); it is 8."),
        ({**KEYS, "auth": KEYS["auth"] + "!!!"}, _NOT_BASE64),  # urlsafe_b64decode drops what is not base64
        ({**KEYS, "p256dh": KEYS["p256dh"][:40] + " " + KEYS["p256dh"][40:]}, _NOT_BASE64),
        ({**KEYS, "p256dh": KEYS["p256dh"] + "=AAAA"}, _NOT_BASE64),
    ],
)  # fmt: skip
def test_web_push_keys_that_could_not_encrypt_a_push_are_refused(api, keys, problem):
    body = {"platform": "webpush", "subscription": {"endpoint": "https://push.example.com/abc", "keys": keys}}
    response = api.put("/api/v1/users/u-ar-1/devices", body, format="json")
    assert (response.status_code, response.json()["fields"]) == (422, {"subscription": [problem]})


def test_padded_keys_are_accepted_and_stored_as_pywebpush_reads_them(api):
    padded = {name: value + "=" * (-len(value) % 4) for name, value in KEYS.items()}
    body = {"platform": "webpush", "subscription": {"endpoint": "https://push.example.com/abc", "keys": padded}}
    assert api.put("/api/v1/users/u-ar-1/devices", body, format="json").status_code == 201
    device = Recipient.objects.get(user_id="u-ar-1").devices.get(platform="webpush")
    assert device.subscription["keys"] == KEYS  # unpadded


def test_an_fcm_device_needs_a_token(api):
    response = api.put("/api/v1/users/u-ar-1/devices", {"platform": "fcm"}, format="json")
    assert response.json()["fields"] == {"token": ["Required for fcm devices."]}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"platform": "webpush", "subscription": {"endpoint": "http://169.254.169.254/latest",
                                                  "keys": {"p256dh": "x", "auth": "y"}}},
         {"subscription": ["refused URL 'http://169.254.169.254/latest': 169.254.169.254 resolves to the "
                           "non-public address 169.254.169.254"]}),
        ({"platform": "fcm", "token": "t", "subscription": {}}, {"subscription": ["Only for webpush devices."]}),
    ],
)  # fmt: skip
def test_devices_that_cannot_work_are_refused(api, body, fields):
    response = api.put("/api/v1/users/u-ar-1/devices", body, format="json")
    assert (response.status_code, response.json()["fields"]) == (422, fields)


@pytest.mark.parametrize("value", ["no", 0, "off", None])
def test_preference_values_are_json_booleans(api, value):
    response = api.put("/api/v1/users/u-ar-1/preferences", {"channels": {"promo": {"email": value}}}, format="json")
    assert response.status_code == 422


def test_an_app_that_signs_out_unregisters_its_device_and_pushes_stop(api):
    put = api.put("/api/v1/users/u-ar-1/devices", {"platform": "fcm", "token": "fcm-signed-out"}, format="json")
    assert put.status_code == 201

    response = api.post("/api/v1/users/u-ar-1/devices/unregister", {"token": "fcm-signed-out"}, format="json")

    assert response.status_code == 200
    assert response.json()["disabled_reason"] == "unregistered by API client orders"
    device = Recipient.objects.get(user_id="u-ar-1").devices.get(token="fcm-signed-out")
    assert device.disabled_at is not None  # kept for support, left out of every push
    again = api.put("/api/v1/users/u-ar-1/devices", {"platform": "fcm", "token": "fcm-signed-out"}, format="json")
    assert (again.status_code, again.json()["disabled_at"]) == (200, None)  # signing in again enables it


@pytest.mark.parametrize(
    ("user_id", "body", "status", "answer"),
    [
        ("u-ar-1", {"token": "never-registered"}, 404, "User 'u-ar-1' has no device with that token."),
        ("u-en-1", {"token": "fcm-of-u-ar-1"}, 404, "User 'u-en-1' has no device with that token."),  # not theirs
        ("nobody", {"token": "fcm-of-u-ar-1"}, 404, "No user with id 'nobody'."),
    ],
)
def test_a_token_the_user_does_not_have_is_a_404_and_changes_nothing(api, user_id, body, status, answer):
    api.put("/api/v1/users/u-ar-1/devices", {"platform": "fcm", "token": "fcm-of-u-ar-1"}, format="json")
    response = api.post(f"/api/v1/users/{user_id}/devices/unregister", body, format="json")
    assert (response.status_code, response.json()["message"]) == (status, answer)
    assert Device.objects.get(token="fcm-of-u-ar-1").disabled_at is None


def test_an_unregister_without_a_token_is_a_422(api):
    response = api.post("/api/v1/users/u-ar-1/devices/unregister", {}, format="json")
    assert (response.status_code, response.json()["fields"]) == (422, {"token": ["This field is required."]})
