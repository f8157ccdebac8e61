"""End users' inbox tokens: who may open which inbox, and for how long."""

from datetime import timedelta

import pytest
import time_machine
from django.core import signing
from django.utils import timezone

from inbox import tokens

pytestmark = pytest.mark.usefixtures("demo_data")


def test_a_token_names_the_user_it_was_issued_for():
    token = tokens.issue("u-ar-1")
    assert tokens.verify(token.value) == "u-ar-1"
    assert token.expires_in == 900


def test_a_token_expires_after_the_configured_lifetime(settings):
    settings.INBOX = {**settings.INBOX, "TOKEN_TTL": 60}
    with time_machine.travel(timezone.now() - timedelta(seconds=61), tick=False):
        old = tokens.issue("u-ar-1")
    with pytest.raises(tokens.ExpiredToken):
        tokens.verify(old.value)


def test_a_tampered_token_is_invalid_not_expired():
    value = tokens.issue("u-ar-1").value
    _, _, rest = value.partition(":")  # keep the signature, swap the user
    forged = signing.b64_encode(b'{"u":"u-en-1"}').decode() + ":" + rest
    with pytest.raises(tokens.InvalidToken) as caught:
        tokens.verify(forged)
    assert not isinstance(caught.value, tokens.ExpiredToken)


def test_a_page_link_does_not_open_the_socket_and_a_token_does_not_open_the_page():
    with pytest.raises(tokens.InvalidToken):
        tokens.verify(tokens.page_link("u-ar-1"))
    with pytest.raises(tokens.InvalidToken):
        tokens.user_for_link(tokens.issue("u-ar-1").value)


def test_the_service_gets_a_token_for_an_existing_user(api):
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        response = api.post("/api/v1/users/u-ar-1/inbox-token")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"user_id", "token", "expires_at", "expires_in"}
    assert (body["user_id"], body["expires_in"]) == ("u-ar-1", 900)
    assert body["expires_at"] == (now + timedelta(seconds=900)).isoformat().replace("+00:00", "Z")
    assert tokens.verify(body["token"]) == "u-ar-1"


def test_a_token_for_an_unknown_user_is_404(api):
    response = api.post("/api/v1/users/u-nobody/inbox-token")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": "No user with id 'u-nobody'."}


def test_tokens_need_the_services_api_key(client):
    response = client.post("/api/v1/users/u-ar-1/inbox-token")
    assert response.status_code == 401
    assert response.json()["error"] == "not_authenticated"


def test_an_inbox_token_is_not_an_api_key(client):
    token = tokens.issue("u-ar-1").value
    response = client.post("/api/v1/users/u-ar-1/inbox-token", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401
    assert response.json() == {"error": "not_authenticated", "message": "Unknown or revoked API key."}
