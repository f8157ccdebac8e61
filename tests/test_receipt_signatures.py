"""The providers' signature algorithms, pinned to the vectors their own SDKs test with."""

import pytest

from backend.notifications.receipts.signatures import (
    twilio_signature,
    twilio_signature_matches,
    vonage_signature,
    vonage_signature_matches,
)

# twilio-python tests/unit/test_request_validator.py (auth token "12345").
TWILIO_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
TWILIO_PARAMS = [
    ("CallSid", "CA1234567890ABCDE"),
    ("Caller", "+14158675309"),
    ("Digits", "1234"),
    ("From", "+14158675309"),
    ("To", "+18005551212"),
]


def test_twilio_signs_the_url_and_the_sorted_parameters():
    assert twilio_signature("12345", TWILIO_URL, reversed(TWILIO_PARAMS)) == "RSOYDt4T1cUTdK1PDd93/VVr8B8="


@pytest.mark.parametrize(
    ("url", "signature"),
    [
        (TWILIO_URL, "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        (TWILIO_URL, "kvajT1Ptam85bY51eRf/AJRuM3w="),  # Twilio signed with :443 written out
        (TWILIO_URL.replace(".com", ".com:1234"), "RSOYDt4T1cUTdK1PDd93/VVr8B8="),  # we see a port it did not
        (TWILIO_URL.replace("https", "http"), "0ZXoZLH/DfblKGATFgpif+LLRf4="),  # http with :80
    ],
)
def test_twilio_signatures_hold_with_or_without_the_port(url, signature):
    assert twilio_signature_matches("12345", url, TWILIO_PARAMS, signature)


@pytest.mark.parametrize(
    ("token", "params", "signature"),
    [
        ("12346", TWILIO_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        ("12345", [*TWILIO_PARAMS[:-1], ("To", "+18005551213")], "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        ("12345", TWILIO_PARAMS, ""),
        ("12345", TWILIO_PARAMS, "ﾃ｣"),  # not ASCII: refused, not a TypeError
    ],
)
def test_twilio_signatures_fail_for_another_token_a_changed_field_or_junk(token, params, signature):
    assert not twilio_signature_matches(token, TWILIO_URL, params, signature)


# vonage-python-sdk tests/test_signature.py (md5hash, secret "secret") and
# http_client/tests/test_auth.py (HMAC, secret "signature_secret").
@pytest.mark.parametrize(
    ("params", "secret", "method", "expected"),
    [
        ({"a": "1", "b": "2", "timestamp": "1461605396"}, "secret", "md5hash", "6af838ef94998832dbfc29020b564830"),
        (
            {"param1": "value1", "param2": "value2", "timestamp": 1234567890}, "signature_secret", "md5",
            "724c2bf6ca423c36e20631b11d1c5753",
        ),
        (
            {"param1": "value&1", "param2": "value=2", "timestamp": 1234567890}, "signature_secret", "md5",
            "2bbf0abafb2c55e5af6231513896a2ac",
        ),
        (
            {"param1": "value1", "param2": "value2", "timestamp": 1234567890}, "signature_secret", "sha256",
            "280c4320703dbc98bfa22db676655ed2acfbfe8792b062ff7622e67f1183c287",
        ),
    ],
)  # fmt: skip
def test_vonage_signatures_match_the_sdks(params, secret, method, expected):
    assert vonage_signature(params, secret, method) == expected


def test_a_vonage_sig_is_checked_without_itself_and_in_either_case():
    params = {"param": "value", "timestamp": 1234567890, "sig": "655A4D0B7F064DFF438DEFC52B012CF5"}
    assert vonage_signature_matches(params, "signature_secret", "md5")
    assert not vonage_signature_matches({**params, "param": "other"}, "signature_secret", "md5")
    assert not vonage_signature_matches({"param": "value"}, "signature_secret", "md5")


def test_an_unknown_vonage_method_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown Vonage signature method 'sha3'"):
        vonage_signature({"a": "1"}, "secret", "sha3")
