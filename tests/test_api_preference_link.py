"""POST /api/v1/users/{user_id}/preference-link: the orders service asks for Layla's preference center link."""

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
import time_machine
from rest_framework.test import APIClient

from backend.notifications.models import Recipient

pytestmark = pytest.mark.usefixtures("demo_data")

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
URL = "/api/v1/users/u-ar-1/preference-link"


def test_it_returns_a_signed_link_and_when_it_expires(api, client):
    # The record existed before the link was made (a link older than its record names an erased one).
    Recipient.objects.filter(user_id="u-ar-1").update(created_at=NOW - timedelta(days=30))
    with time_machine.travel(NOW, tick=False):
        response = api.post(URL)
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"url", "expires_at"}
    assert body["url"].startswith("http://127.0.0.1:8000/preferences/")
    assert body["expires_at"] == "2026-12-07T10:00:00Z"  # NOTIFY_PREFERENCE_LINK_TTL: 7 days

    page = client.get(urlsplit(body["url"]).path)
    assert page.status_code == 200
    assert '<html lang="ar" dir="rtl">' in page.content.decode()


def test_the_link_stops_working_at_expires_at(api, client):
    with time_machine.travel(NOW, tick=False):
        path = urlsplit(api.post(URL).json()["url"]).path
    with time_machine.travel(NOW + timedelta(days=7, seconds=1), tick=False):
        assert client.get(path).status_code == 410


def test_the_public_url_setting_is_the_links_base(api, settings):
    settings.NOTIFY = {**settings.NOTIFY, "PUBLIC_URL": "https://notify.example.com/"}
    assert api.post(URL).json()["url"].startswith("https://notify.example.com/preferences/")


def test_an_unknown_user_is_a_404_json_error(api):
    response = api.post("/api/v1/users/nobody/preference-link")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": "No user with id 'nobody'."}


def test_it_needs_an_api_key(db):
    response = APIClient().post(URL)
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"


def test_get_is_not_allowed(api):
    assert api.get(URL).status_code == 405


def test_it_is_in_the_openapi_schema(client):
    operation = client.get("/api/v1/openapi.json").json()["paths"]["/api/v1/users/{user_id}/preference-link"]["post"]
    assert operation["operationId"] == "issue_preference_link"
    assert set(operation["responses"]) == {"201", "401", "404"}
    schema = operation["responses"]["201"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/PreferenceLink"}
