"""The published OpenAPI schema and the strict environment readers."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from backend.env import EnvError, env_bool, env_database, env_int

ROOT = Path(__file__).resolve().parents[1]


def test_openapi_schema_is_served_as_json_without_a_key(client, db):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    assert set(schema["paths"]) == {
        "/api/v1/notifications",
        "/api/v1/notifications/batch",
        "/api/v1/notifications/{id}",
        "/api/v1/notifications/{id}/cancel",
        "/api/v1/users/{user_id}",
        "/api/v1/sms/segments",
        "/api/v1/users/{user_id}/inbox-token",
        "/api/v1/users/{user_id}/inbox",
        "/api/v1/users/{user_id}/inbox/read-all",
        "/api/v1/users/{user_id}/inbox/{message_id}/read",
        "/api/v1/users/{user_id}/inbox/{message_id}/archive",
        "/api/v1/users/{user_id}/preference-link",
        "/api/v1/users/{user_id}/preferences",
        "/api/v1/users/{user_id}/devices",
        "/api/v1/users/{user_id}/devices/unregister",
        "/api/v1/campaigns",
        "/api/v1/campaigns/{id}",
        "/api/v1/campaigns/{id}/report.pdf",
        "/api/v1/campaigns/{id}/pause",
        "/api/v1/campaigns/{id}/resume",
    }
    assert schema["components"]["securitySchemes"]["apiKey"] == {"type": "http", "scheme": "bearer"}
    post = schema["paths"]["/api/v1/notifications"]["post"]
    assert {k: v for k, v in post["parameters"][0].items() if k in ("name", "in", "required")} == {
        "name": "Idempotency-Key",
        "in": "header",
        "required": True,
    }
    assert set(post["responses"]) == {"200", "202", "400", "401", "409", "413", "415", "422", "429", "503"}


def test_api_docs_page_uses_vendored_assets(client, db):
    response = client.get("/api/v1/docs")
    assert response.status_code == 200
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist/" in response.content
    assert b"cdn." not in response.content


@pytest.mark.parametrize(("raw", "value"), [("1", True), ("true", True), ("ON", True), ("0", False), ("off", False)])
def test_env_bool_accepts_only_clear_values(monkeypatch, raw, value):
    monkeypatch.setenv("X_FLAG", raw)
    assert env_bool("X_FLAG", default=not value) is value


@pytest.mark.parametrize("raw", ["yes", "y", "2", "enabled"])
def test_env_bool_refuses_yes_ish_values(monkeypatch, raw):
    monkeypatch.setenv("X_FLAG", raw)
    with pytest.raises(EnvError, match=re.escape(f"X_FLAG='{raw}': expected one of 1/0, true/false, on/off")):
        env_bool("X_FLAG", default=False)


def test_env_int_refuses_non_integers_and_values_outside_its_bounds(monkeypatch):
    monkeypatch.setenv("X_N", "4.5")
    with pytest.raises(EnvError, match=re.escape("X_N='4.5': expected an integer")):
        env_int("X_N", 1)
    monkeypatch.setenv("X_N", "0")
    with pytest.raises(EnvError, match="X_N=0: must be at least 1"):
        env_int("X_N", 1, minimum=1)
    monkeypatch.setenv("X_N", "99999999")
    with pytest.raises(EnvError, match="X_N=99999999: must be at most 36500"):
        env_int("X_N", 1, maximum=36_500)


@pytest.mark.parametrize(
    "raw, problem",
    [
        ("", "is set but empty"),
        ("   ", "is set but empty"),
        ("mysql://notify:s3cret@db/notify", "has the scheme 'mysql', not a supported database's"),
        ("postgres://notify:s3cret@db:fivefourthreetwo/notify", "cannot be read (This string is not a valid url"),
        ("postgres://notify:s3cret@[::1/notify", "cannot be read (Invalid IPv6 URL)"),
        # One slash: the whole rest would be the database's name, which the server's refusal quotes.
        ("postgres:/notify:s3cret@db/notify", "has no // after postgres:"),
        ("postgres://notify:s3cret@db/", "has no database name after the host, or one holding / @ or :"),
        ("postgres://notify:s3cret@db/notify?connect_timeout=abc", "has a connect_timeout that is not a whole number"),
        ("sqlite://", "names no database file after sqlite:///"),
        ("sqlite:///:memory:", "names no database file after sqlite:///"),
        ("sqlite://var/notify.sqlite3", "names no database file after sqlite:///"),
    ],
)
def test_env_database_refuses_what_is_no_database_url_without_quoting_the_password(monkeypatch, raw, problem):
    monkeypatch.setenv("X_DB", raw)
    with pytest.raises(EnvError) as refused:
        env_database("X_DB", "sqlite:///demo.sqlite3")
    message = str(refused.value)
    assert message.startswith(f"X_DB {problem}") and "s3cret" not in message
    assert message.endswith(
        "expected postgres://user:password@host:5432/name or sqlite:///path (unset: the embedded SQLite file)"
    )


def test_env_database_reads_postgresql_and_sqlite_and_defaults_when_unset(monkeypatch):
    monkeypatch.delenv("X_DB", raising=False)
    assert env_database("X_DB", "sqlite:///demo.sqlite3")["NAME"] == "demo.sqlite3"
    monkeypatch.setenv("X_DB", "sqlite:////srv/notify/notify.sqlite3")
    assert env_database("X_DB", "sqlite:///demo.sqlite3")["NAME"] == "/srv/notify/notify.sqlite3"
    monkeypatch.setenv("X_DB", "postgres:///notify")  # the local socket
    assert {key: env_database("X_DB", "")[key] for key in ("NAME", "HOST")} == {"NAME": "notify", "HOST": ""}
    monkeypatch.setenv("X_DB", " postgres://notify:pw@db:5433/notify?connect_timeout=3 ")
    database = env_database("X_DB", "sqlite:///demo.sqlite3", conn_max_age=60)
    assert {key: database[key] for key in ("ENGINE", "NAME", "USER", "PASSWORD", "HOST", "PORT", "CONN_MAX_AGE")} == {
        "ENGINE": "django.db.backends.postgresql", "NAME": "notify", "USER": "notify", "PASSWORD": "pw", "HOST": "db",
        "PORT": 5433, "CONN_MAX_AGE": 60,
    }  # fmt: skip
    assert database["OPTIONS"] == {"connect_timeout": 3}


def test_secret_file_wins_over_the_variable(monkeypatch, tmp_path):
    from backend.env import env_str

    (tmp_path / "secret").write_text("from-file\n")
    monkeypatch.setenv("X_SECRET", "from-env")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "secret"))
    assert env_str("X_SECRET") == "from-file"


def test_the_idempotency_key_is_bounded_as_the_server_bounds_it(client, db):
    post = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/notifications"]["post"]
    [key] = [p for p in post["parameters"] if p["name"] == "Idempotency-Key"]
    schema = key["schema"]
    assert (schema["minLength"], schema["maxLength"]) == (1, 255)
    pattern = re.compile(schema["pattern"])
    assert pattern.match("order-5012-shipped")
    assert not pattern.match(" padded") and not pattern.match("tab\there") and not pattern.match("")


def test_every_operation_lists_the_answers_the_layers_before_its_view_give(client, db):
    """401 everywhere (a key or an inbox token), 413 and 415 wherever a body is read, 429 on the sends."""
    schema = client.get("/api/v1/openapi.json").json()
    operations = [(path, method, op) for path, ops in schema["paths"].items() for method, op in ops.items()]
    assert len(operations) == 26
    for path, method, operation in operations:
        codes = set(operation["responses"])
        assert "401" in codes, (path, method)
        assert ({"413", "415"} <= codes) == ("requestBody" in operation), (path, method)
    paths = schema["paths"]
    assert "429" in paths["/api/v1/notifications"]["post"]["responses"]
    assert "429" in paths["/api/v1/notifications/batch"]["post"]["responses"]
    names = set(schema["components"]["schemas"])
    assert {"SendRequest", "BatchRequest", "BatchItemRequest"} <= names
    assert not {name for name in names if name.endswith("RequestRequest")}


def test_closed_sets_are_enumerated_from_what_the_server_accepts(client, db):
    from backend.notifications import locales, pricing

    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert set(schemas["LanguageEnum"]["enum"]) == locales.language_codes()
    assert {"en", "ar", "fa"} <= set(schemas["LanguageEnum"]["enum"])
    assert set(schemas["TimeZoneEnum"]["enum"]) == locales.time_zone_names()
    assert schemas["ProviderEnum"]["enum"] == sorted(pricing.price_list().providers) == ["twilio", "vonage"]
    for name in ("RecipientRequest", "PreferencesRequest"):
        properties = schemas[name]["properties"]
        assert properties["language"]["allOf"][0]["$ref"] == "#/components/schemas/LanguageEnum"
        assert properties["time_zone"]["allOf"][0]["$ref"] == "#/components/schemas/TimeZoneEnum"
    assert schemas["SmsTextRequest"]["properties"]["provider"]["allOf"][0]["$ref"].endswith("/ProviderEnum")


def test_a_secret_file_that_is_missing_or_empty_stops_start_up_naming_the_variable(monkeypatch, tmp_path):
    from backend.env import env_str

    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "absent"))
    with pytest.raises(EnvError, match=re.escape(f"X_SECRET_FILE={tmp_path / 'absent'}: No such file or directory")):
        env_str("X_SECRET")
    (tmp_path / "blank").write_text(" \n")
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "blank"))
    with pytest.raises(EnvError, match=re.escape(f"X_SECRET_FILE={tmp_path / 'blank'}: the file is empty")):
        env_str("X_SECRET")


@pytest.mark.parametrize(
    "command",
    [["manage.py", "check"], ["-c", "import backend.web"], ["-c", "import backend.asgi"]],
    ids=["manage.py", "web", "ws"],
)
def test_a_bad_setting_stops_each_entry_point_with_one_line(command):
    """What an operator starts says which variable is wrong and what it expected, not a 40-line traceback."""
    env = {**os.environ, "NOTIFY_BREAKER_FAILURE_RATE": "half"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run([sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)

    assert done.returncode == 2
    assert done.stderr == "Configuration error: NOTIFY_BREAKER_FAILURE_RATE='half': expected a number\n"
