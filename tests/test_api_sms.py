"""POST /api/v1/sms/segments: encoding, segments and price of a text before it is sent."""

import pytest

from backend.notifications import pricing
from backend.stubs.providers_file import stub_providers_toml

pytestmark = pytest.mark.django_db

URL = "/api/v1/sms/segments"
BEH = "ب"
SMILE = "😀"
PRICES = """# test prices
provider,country,price_per_segment,currency
twilio,SA,0.0250,USD
vonage,SA,0.0200,USD
vonage,EG,0.0980,USD
twilio,EG,0.1050,USD
vonage,IR,0.0950,USD
"""


@pytest.fixture(autouse=True)
def prices(tmp_path, settings):
    path = tmp_path / "prices.csv"
    path.write_text(PRICES, encoding="utf-8")
    settings.NOTIFY = {**settings.NOTIFY, "SMS_PRICES": str(path)}


def post(api, body):
    return api.post(URL, body, format="json")


def test_it_counts_a_gsm7_text(api):
    response = post(api, {"text": "Hello [world]"})
    assert response.status_code == 200
    assert response.json() == {
        "encoding": "GSM-7",
        "units": 15,  # 11 basic septets + [ and ] at 2 each
        "units_left": 145,
        "segments": 1,
        "parts": ["Hello [world]"],
        "ucs2_characters": [],
        "price": None,
    }


def test_it_names_each_character_forcing_ucs2_with_its_look_alike(api):
    body = post(api, {"text": "It’s 10\u00a0€ 😀"}).json()
    assert (body["encoding"], body["units"], body["units_left"], body["segments"]) == ("UCS-2", 12, 58, 1)
    assert body["ucs2_characters"] == [
        {"char": "’", "index": 2, "replacement": "'"},
        {"char": "\u00a0", "index": 7, "replacement": " "},
        {"char": SMILE, "index": 10, "replacement": None},
    ]


def test_it_returns_the_parts_of_a_long_text(api):
    body = post(api, {"text": "A" * 152 + "€" + "B" * 10}).json()
    assert (body["units"], body["segments"], body["units_left"]) == (164, 2, 141)
    assert body["parts"] == ["A" * 152, "€" + "B" * 10]


def test_it_prices_a_message_to_a_number(api):
    response = post(api, {"text": BEH * 135, "to": "+966501234567"})
    assert response.status_code == 200
    body = response.json()
    assert body["segments"] == 3
    assert body["price"] == {
        "amount": "0.0750",
        "currency": "USD",
        "country": "SA",
        "provider": "twilio",
        "per_segment": "0.0250",
    }


def test_it_prices_with_the_named_provider(api):
    body = post(api, {"text": BEH * 135, "to": "+966 50 123 4567", "provider": "vonage"}).json()
    assert (body["price"]["provider"], body["price"]["amount"]) == ("vonage", "0.0600")


def test_the_default_provider_is_the_first_listed_for_the_country(api):
    body = post(api, {"text": "Your code is 4821", "to": "+201001234567"}).json()
    assert body["price"] == {
        "amount": "0.0980",
        "currency": "USD",
        "country": "EG",
        "provider": "vonage",
        "per_segment": "0.0980",
    }


@pytest.mark.parametrize(
    ("route", "provider", "amount"),
    [
        pytest.param(["twilio", "vonage"], "twilio", "0.1050", id="twilio-first-though-vonage-is-listed-first-for-EG"),
        pytest.param(["vonage", "twilio"], "vonage", "0.0980", id="vonage-first"),
    ],
)
def test_the_default_provider_is_the_one_sms_are_sent_by(api, tmp_path, settings, route, provider, amount):
    # The price list has vonage 0.0980 then twilio 0.1050 for EG: a quote must be what the send will record.
    path = tmp_path / "providers.toml"
    path.write_text(stub_providers_toml("http://127.0.0.1:9", timeout=2.0, routes={"sms": route}))
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    body = post(api, {"text": "Your code is 4821", "to": "+201001234567"}).json()
    assert (body["price"]["provider"], body["price"]["amount"]) == (provider, amount)
    assert pricing.price_list().preferred_providers("EG")[0] == provider


def test_whitespace_counts_as_sent(api):
    body = post(api, {"text": " a \n"}).json()
    assert (body["units"], body["parts"]) == (4, [" a \n"])


def test_an_empty_text_is_one_segment(api):
    body = post(api, {"text": "", "to": "+966501234567"}).json()
    assert (body["units"], body["segments"], body["parts"], body["price"]["amount"]) == (0, 1, [""], "0.0250")


def test_a_text_of_10000_characters_is_accepted(api):
    body = post(api, {"text": "€" * 10_000}).json()
    # 20,000 septets; a part holds 76 euro signs (152 septets): 10,000 / 76 → 132 parts.
    assert (body["units"], body["segments"]) == (20_000, 132)


def test_a_text_over_10000_characters_is_a_422(api):
    response = post(api, {"text": "a" * 10_001})
    assert response.status_code == 422
    assert response.json() == {
        "error": "invalid",
        "message": "text: Ensure this field has no more than 10000 characters.",
        "fields": {"text": ["Ensure this field has no more than 10000 characters."]},
    }


@pytest.mark.parametrize(
    ("to", "message"),
    [
        ("0501234567", "Give the number in international format, starting with + and the country code."),
        ("+966 12", "Not a valid phone number for its country."),
        ("+abc", "Not a phone number: (1) The string supplied did not seem to be a phone number.."),
        ("+80012345678", "A non-geographic number belongs to no country; it has no SMS price."),
        ("+81312345678", "No SMS price for JP in the price list."),
        ("", "This field may not be blank."),
    ],
)
def test_a_number_that_cannot_be_priced_is_a_422(api, to, message):
    response = post(api, {"text": "hi", "to": to})
    assert response.status_code == 422
    assert response.json() == {"error": "invalid", "message": f"to: {message}", "fields": {"to": [message]}}


def test_a_provider_without_a_price_for_the_country_is_a_422_naming_those_with_one(api):
    response = post(api, {"text": "hi", "to": "+989121234567", "provider": "twilio"})
    assert (response.status_code, response.json()["fields"]) == (
        422, {"to": ["Provider 'twilio' has no SMS price for IR; providers with one: vonage."]},
    )  # fmt: skip


@pytest.mark.parametrize(
    "body", [{"text": "hi", "provider": "acme"}, {"text": "hi", "to": "+966501234567", "provider": "acme"}]
)
def test_an_unknown_provider_is_a_422_with_or_without_a_number(api, body):
    response = post(api, body)
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "provider": ["Unknown SMS provider 'acme'; the price list has: twilio, vonage."]
    }


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"text": "hi", "colour": "red"}, {"colour": ["Unknown field."]}),
        ({}, {"text": ["This field is required."]}),
        ({"text": None}, {"text": ["This field may not be null."]}),
        ({"text": 42}, {"text": ["Not a valid string."]}),
        ({"text": "hi", "to": 966501234567}, {"to": ["Not a valid string."]}),
    ],
)
def test_bad_fields_are_a_422_naming_them(api, body, fields):
    response = post(api, body)
    assert (response.status_code, response.json()["fields"]) == (422, fields)


def test_a_lone_surrogate_is_a_422(api):
    response = api.post(URL, '{"text": "a\\ud83d"}', content_type="application/json")
    assert (response.status_code, response.json()["fields"]) == (
        422, {"text": ["text contains an unpaired surrogate (invalid UTF-16)."]},
    )  # fmt: skip


def test_a_body_that_is_not_an_object_is_a_400(api):
    response = post(api, ["hi"])
    assert response.status_code == 400
    assert response.json() == {"error": "malformed_request", "message": "The body must be a JSON object."}


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "Missing 'Authorization: Bearer <API key>' header."),
        ("Bearer ntf_wrong", "Unknown or revoked API key."),
    ],
)
def test_it_refuses_callers_without_a_valid_key(client, authorization, message):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.post(URL, {"text": "hi"}, content_type="application/json", **headers)
    assert response.status_code == 401
    assert response.json() == {"error": "not_authenticated", "message": message}


def test_get_is_not_allowed(api):
    response = api.get(URL)
    assert (response.status_code, response.json()["error"]) == (405, "method_not_allowed")
