"""The providers file: what it says, and the clear errors when it says something that cannot work."""

from pathlib import Path

import pytest
from django.core.checks import run_checks

from backend.notifications.providers.base import providers_for_channel
from backend.notifications.providers.config import ProvidersFileError, providers_config

EXAMPLE = Path(__file__).resolve().parent.parent / "deploy" / "providers.example.toml"
SECRETS = ["TWILIO_ACCOUNT_SID", "TWILIO_AUTH_TOKEN", "TWILIO_MESSAGING_SERVICE_SID", "VONAGE_API_KEY",
           "VONAGE_API_SECRET", "VONAGE_SIGNATURE_SECRET", "VAPID_PRIVATE_KEY"]  # fmt: skip


@pytest.fixture
def use_file(settings):
    def _use(path: Path):
        settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}

    return _use


def test_the_example_file_routes_sms_to_twilio_then_vonage(use_file, monkeypatch):
    for name in SECRETS:
        monkeypatch.setenv(name, f"secret-{name.lower()}")
    use_file(EXAMPLE)
    sms = providers_for_channel("sms")
    assert [(p.name, p.config.rate, p.config.high_share, p.config.concurrency) for p in sms] == [
        ("twilio", 100.0, 0.3, 20), ("vonage", 30.0, 0.5, 10),
    ]  # fmt: skip
    assert sms[0].config.option("auth_token") == "secret-twilio_auth_token"
    assert [p.name for p in providers_for_channel("push")] == ["fcm", "webpush"]
    assert [p.name for p in providers_for_channel("email")] == ["smtp"]  # not in the file: the default


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[channels]\nsms = ["nope"]\n', "channel 'sms' names provider 'nope', which is not defined"),
        ('[providers.t]\ntype = "twilio"\nhigh_share = 1.5\n', "provider 't': high_share must be in [0, 1), got 1.5"),
        ('[providers.t]\ntype = "twilio"\ntoken_env = "NOTIFY_TEST_UNSET"\n',
         "provider 't': token_env names $NOTIFY_TEST_UNSET, which is not set"),
        ('[providers.t]\nrate = "fast"\n', "provider 't': could not convert string to float: 'fast'"),
        ("[channels\n", "Expected ']' at the end of a table declaration (at line 1, column 10)"),
        # A name is a label in Redis fields split on "|" (metric counters, sent-markers) and in Prometheus.
        ('[providers."tw|lio"]\ntype = "twilio"\n',
         "provider 'tw|lio': a name is 1 to 32 lowercase letters, digits, '.', '_' or '-' (e.g. twilio-backup)"),
        ('[providers.Twilio]\ntype = "twilio"\n',
         "provider 'Twilio': a name is 1 to 32 lowercase letters, digits, '.', '_' or '-' (e.g. twilio-backup)"),
        # No scheme: libcurl (a batch's calls) would guess http:// and send the auth token in clear text.
        ('[providers.t]\ntype = "twilio"\nbase_url = "api.twilio.com"\n',
         "provider 't': base_url must be an http(s) URL such as https://api.twilio.com, got 'api.twilio.com'"),
        ('[providers.t]\ntype = "fcm"\nbase_url = "ftp://fcm.example"\n',
         "provider 't': base_url must be an http(s) URL such as https://api.twilio.com, got 'ftp://fcm.example'"),
        ('[providers.t]\ntype = "vonage"\nbase_url = 7\n',
         "provider 't': base_url must be an http(s) URL such as https://api.twilio.com, got 7"),
    ],
)  # fmt: skip
def test_a_broken_file_is_refused_with_a_reason(use_file, tmp_path, toml, message):
    path = tmp_path / "providers.toml"
    path.write_text(toml)
    use_file(path)
    with pytest.raises(ProvidersFileError) as caught:
        providers_config()
    assert str(caught.value).endswith(message)


def test_a_broken_file_fails_the_system_check(use_file, tmp_path):
    path = tmp_path / "providers.toml"
    path.write_text('[channels]\nsms = ["nope"]\n')
    use_file(path)
    [error] = [e for e in run_checks() if e.id == "notify.E003"]
    assert error.msg.startswith("The providers file is unusable: ")
