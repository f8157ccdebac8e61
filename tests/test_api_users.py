"""PUT/GET /api/v1/users/{user_id}: contact data, validated and normalised."""

import pytest

from backend.notifications.models import Recipient

pytestmark = pytest.mark.django_db

LAYLA = {"email": "layla@example.com", "phone": "+966 50 123 4567", "language": "ar", "time_zone": "Asia/Riyadh"}


def put(api, user_id, body):
    return api.put(f"/api/v1/users/{user_id}", body, format="json")


def test_put_creates_with_the_phone_in_e164(api):
    response = put(api, "u-9", LAYLA)
    assert response.status_code == 201
    body = response.json()
    assert {k: body[k] for k in ("user_id", "email", "phone", "language", "time_zone")} == {
        "user_id": "u-9",
        "email": "layla@example.com",
        "phone": "+966501234567",
        "language": "ar",
        "time_zone": "Asia/Riyadh",
    }
    assert Recipient.objects.get(user_id="u-9").phone == "+966501234567"


def test_put_again_replaces_the_whole_record(api):
    put(api, "u-9", LAYLA)
    response = put(api, "u-9", {"email": "new@example.com"})
    assert response.status_code == 200
    recipient = Recipient.objects.get(user_id="u-9")
    assert (recipient.email, recipient.phone, recipient.language, recipient.time_zone) == (
        "new@example.com", "", "en", "UTC",
    )  # fmt: skip


def test_get_returns_the_contact_data(api):
    put(api, "u-9", LAYLA)
    response = api.get("/api/v1/users/u-9")
    assert (response.status_code, response.json()["phone"]) == (200, "+966501234567")


def test_get_unknown_user_is_a_404(api):
    response = api.get("/api/v1/users/nobody")
    assert (response.status_code, response.json()["message"]) == (404, "No user with id 'nobody'.")


UNKNOWN_LANGUAGE = "Unknown language code '{}'; use an ISO 639-1 code such as en, ar or fa (ar-SA is read as ar)."


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("phone", "0501234567", "Give the number in international format, starting with + and the country code."),
        ("phone", "+966 12", "Not a valid phone number for its country."),
        ("phone", "+abc", "Not a phone number: (1) The string supplied did not seem to be a phone number.."),
        ("time_zone", "Mars/Olympus", "Unknown time zone 'Mars/Olympus'; use an IANA name such as Asia/Riyadh."),
        ("time_zone", "../etc/passwd", "Unknown time zone '../etc/passwd'; use an IANA name such as Asia/Riyadh."),
        ("language", "xx", UNKNOWN_LANGUAGE.format("xx")),
        ("language", "xx-SA", UNKNOWN_LANGUAGE.format("xx-SA")),
        ("language", "ar-", UNKNOWN_LANGUAGE.format("ar-")),
        ("email", "not-an-email", "Enter a valid email address."),
        ("email", 42, "Enter a valid email address."),
        ("nickname", "Lulu", "Unknown field."),
        ("phone", "+966 50 123 4567 ext 5", "An extension cannot receive SMS; give the number without it."),
        ("time_zone", "Factory", "Unknown time zone 'Factory'; use an IANA name such as Asia/Riyadh."),
        ("email", "a" * 250 + "@example.com", "Ensure this field has no more than 254 characters."),
        ("user_id", "u-9", "The user id is taken from the URL; leave it out."),
        ("language", 7, "Must be a string."),
    ],
)  # fmt: skip
def test_bad_contact_data_is_a_422_naming_the_field(api, field, value, message):
    response = put(api, "u-9", {**LAYLA, field: value})
    assert response.status_code == 422
    assert response.json()["fields"] == {field: [message]}
    assert not Recipient.objects.exists()


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("ar-SA", "ar"),
        ("fa_IR", "fa"),
        ("en-US", "en"),
        ("zh-Hant-TW", "zh"),
        ("AR", "ar"),
        ("ckb-IQ", "ckb"),
        ("ar-SA-u-nu-latn", "ar"),
        ("en-x-private", "en"),
        ("iw_IL", "he"),
        ("in_ID", "id"),
        ("ji", "yi"),
    ],
)
def test_a_locale_tag_is_stored_as_its_language(api, sent, stored):
    """Apps send their platform's locale; templates are per language, so the region and script are not kept."""
    response = put(api, "u-9", {**LAYLA, "language": sent})
    assert (response.status_code, response.json()["language"]) == (201, stored), response.content
    assert Recipient.objects.get(user_id="u-9").language == stored
    preferences = api.put("/api/v1/users/u-9/preferences", {"language": sent}, format="json")
    assert (preferences.status_code, preferences.json()["language"]) == (200, stored)


def test_an_empty_body_does_not_erase_the_record(api):
    put(api, "u-9", LAYLA)
    response = put(api, "u-9", {})
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "body": ["Send the contact data: PUT replaces the whole record, so an empty body would erase it."]
    }
    assert Recipient.objects.get(user_id="u-9").email == "layla@example.com"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("%20u-9", "May not start or end with spaces."),
        # A control character in any path (u%00x) is refused before the view: tests/test_unreadable_requests.py.
        ("u%EF%BF%BDx", "May not contain control characters or invalid UTF-8."),  # U+FFFD: daphne's undecodable byte
        ("u%E2%80%AEx", "May not contain bidirectional control characters."),  # U+202E RIGHT-TO-LEFT OVERRIDE
    ],
)
def test_user_ids_in_the_url_follow_the_same_rules(api, path, message):
    response = api.put(f"/api/v1/users/{path}", LAYLA, format="json")
    assert (response.status_code, response.json().get("fields")) == (422, {"user_id": [message]}), response.json()


def test_a_user_id_over_128_characters_is_refused(api):
    response = put(api, "u" * 129, LAYLA)
    assert (response.status_code, response.json()["fields"]) == (422, {"user_id": ["At most 128 characters."]})


def test_arabic_user_ids_work(api):
    assert put(api, "مستخدم-١", LAYLA).status_code == 201
    assert api.get("/api/v1/users/مستخدم-١").json()["user_id"] == "مستخدم-١"


def test_it_requires_a_key(client):
    response = client.put("/api/v1/users/u-9", LAYLA, content_type="application/json")
    assert response.status_code == 401


def test_attributes_are_stored_and_returned(api):
    attributes = {"plan": "gold", "orders": 7, "ltv.sar": 1234.5, "city": "الرياض"}
    assert put(api, "u-9", {**LAYLA, "attributes": attributes}).status_code == 201
    assert Recipient.objects.get(user_id="u-9").attributes == attributes
    assert api.get("/api/v1/users/u-9").json()["attributes"] == attributes


def test_attributes_left_out_are_cleared_like_every_other_field(api):
    put(api, "u-9", {**LAYLA, "attributes": {"plan": "gold"}})
    put(api, "u-9", LAYLA)
    assert api.get("/api/v1/users/u-9").json()["attributes"] == {}


KEY_RULE = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter, without '__'"
NOT_FLAT = "Must be a string or a number, not a list or an object: attributes are flat."


@pytest.mark.parametrize(
    ("attributes", "message"),
    [
        (["gold"], 'Must be a JSON object of strings and numbers, e.g. {"plan": "gold", "orders": 7}.'),
        ("plan=gold", 'Must be a JSON object of strings and numbers, e.g. {"plan": "gold", "orders": 7}.'),
        ({"plan": {"tier": "gold"}}, f"plan: {NOT_FLAT}"),
        ({"tags": ["a", "b"]}, f"tags: {NOT_FLAT}"),
        ({"vip": True}, 'vip: true, false and null are not accepted; use a string or a number (e.g. "yes" or 1).'),
        ({"vip": None}, 'vip: true, false and null are not accepted; use a string or a number (e.g. "yes" or 1).'),
        ({"": "x"}, f"Key '': use {KEY_RULE}."),
        ({"k" * 65: "x"}, f"Key {'k' * 65!r}: use {KEY_RULE}."),
        ({"first name": "x"}, f"Key 'first name': use {KEY_RULE}."),
        ({"مدينة": "x"}, f"Key 'مدينة': use {KEY_RULE}."),
        ({"2024": "x"}, f"Key '2024': use {KEY_RULE}."),
        ({"_plan": "x"}, f"Key '_plan': use {KEY_RULE}."),
        ({"plan__gte": "x"}, f"Key 'plan__gte': use {KEY_RULE}."),
        ({"n": 2**53 + 1}, "n: Numbers must lie between -2**53 and 2**53."),
        ({"n": -1e300}, "n: Numbers must lie between -2**53 and 2**53."),
        ({"note": "x" * 4090}, "At most 4096 bytes of JSON; these are 4101."),
    ],
)  # fmt: skip
def test_bad_attributes_are_a_422_with_the_reason(api, attributes, message):
    response = put(api, "u-9", {**LAYLA, "attributes": attributes})
    assert (response.status_code, response.json()["fields"]) == (422, {"attributes": [message]})
    assert not Recipient.objects.exists()


def test_attributes_of_exactly_4_kib_are_accepted(api):
    attributes = {"note": "x" * 4085}  # {"note":"…"} is 11 bytes around the value: 4,096 in all
    assert put(api, "u-9", {**LAYLA, "attributes": attributes}).status_code == 201
