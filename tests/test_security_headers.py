"""HTTPS settings, the Content-Security-Policy and ``manage.py check --deploy`` on a production-like environment."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What deploy/env.example asks of a production machine behind TLS.
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "k" * 20 + "-production-like-secret-key-of-sixty-characters-0123456",
    "NOTIFY_HTTPS": "true",
    "ALLOWED_HOSTS": "notify.example.com",
}


def settings_in(env: dict[str, str], *names: str) -> list[str]:
    """Values of ``names`` as a fresh process sees them under ``env`` (settings are read once, at start)."""
    code = "import django; django.setup(); from django.conf import settings; " + "; ".join(
        f"print(repr(settings.{name}))" for name in names
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "backend.settings", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def test_check_deploy_is_clean_on_a_production_like_environment():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env={**os.environ, **PRODUCTION},
        capture_output=True,
        text=True,
    )
    assert result.stderr == ""
    assert result.stdout == "System check identified no issues (0 silenced).\n"
    assert result.returncode == 0


def test_https_turns_on_secure_cookies_hsts_and_the_proxy_scheme():
    assert settings_in(
        PRODUCTION,
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_PROXY_SSL_HEADER",
        "SECURE_HSTS_SECONDS",
        "SECURE_SSL_REDIRECT",
    ) == ["True", "True", "('HTTP_X_FORWARDED_PROTO', 'https')", "31536000", "True"]


def test_without_https_nothing_claims_it():
    env = {"NOTIFY_HTTPS": "false"}
    assert settings_in(env, "SESSION_COOKIE_SECURE", "SECURE_PROXY_SSL_HEADER", "SECURE_HSTS_SECONDS") == [
        "False",
        "None",
        "0",
    ]


def test_hsts_seconds_can_be_set():
    assert settings_in({**PRODUCTION, "NOTIFY_HSTS_SECONDS": "600"}, "SECURE_HSTS_SECONDS") == ["600"]


@pytest.mark.parametrize("path", ["/", "/admin/login/", "/api/v1/docs"])
def test_pages_carry_a_policy_that_allows_no_inline_script(client, db, path):
    response = client.get(path)
    policy = dict(part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";"))
    assert policy["script-src"] == "'self'"
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"


def test_the_api_docs_page_has_no_inline_script(client, db):
    html = client.get("/api/v1/docs").content.decode()
    assert "<script>" not in html
    script = client.get("/api/v1/docs?script=")
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")


def test_healthz_is_not_redirected_to_https(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/").status_code == 301
