"""The preference center's "stop all marketing" switch, the masked contact data it names, and the brand.

Personas (demo data): Layla (u-ar-1, Arabic, layla@example.com, +966501234567) and Sam (u-en-1, English).
Kinds: otp (security: sms, email), shipped (transactional: email, push, sms), promo (marketing: email, push).
"""

import re
from datetime import UTC, datetime

import pytest
import time_machine
from django.urls import reverse

from backend.env import EnvError, env_web_url
from backend.notifications import actions, links
from backend.notifications.models import Kind, Notification, Preference, Recipient
from tests.test_security_headers import settings_in

pytestmark = pytest.mark.usefixtures("demo_data")

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def frozen_clock():
    with time_machine.travel(datetime(2026, 11, 30, 10, 0, tzinfo=UTC), tick=False):
        yield


def url(user_id: str, name: str = "") -> str:
    return reverse(f"frontend:preferences{name}", args=[links.preference_token(user_id)])


def choices(user_id: str) -> dict[tuple[str, str], bool]:
    rows = Preference.objects.filter(recipient__user_id=user_id)
    return {(kind, channel): enabled for kind, channel, enabled in rows.values_list("kind__name", "channel", "enabled")}


def switch(html: str) -> str:
    return re.search(r'<input type="checkbox" role="switch" name="stopped"[^>]*>', html).group(0)


def test_the_page_names_the_email_and_phone_it_is_about_masked(client):
    html = client.get(url("u-ar-1")).content.decode()
    assert '<bdi dir="ltr">l•••@example.com</bdi>' in html
    assert '<bdi dir="ltr">+9665••••567</bdi>' in html
    assert "layla@" not in html and "501234567" not in html
    assert "<dt>الهاتف</dt>" in html


def test_stop_all_marketing_turns_off_every_offer_and_leaves_the_rest(client):
    shipped = Kind.objects.get(name="shipped")
    actions.set_preference(
        Recipient.objects.get(user_id="u-en-1"), shipped, "sms", False, by=actions.BY_PREFERENCE_CENTER
    )
    response = client.post(url("u-en-1", "-marketing"), {"stopped": "on"}, **HTMX)
    assert response.status_code == 200
    # Every channel, those promo has no template for yet too: one approved later starts off for this user.
    assert choices("u-en-1") == {
        ("promo", "email"): False,
        ("promo", "sms"): False,
        ("promo", "push"): False,
        ("promo", "inapp"): False,
        ("shipped", "sms"): False,  # as it was
    }
    html = response.content.decode()
    assert "Saved" in html
    # The offers' switches follow out of band, now off.
    assert '<ul class="p-kinds" id="p-kinds-marketing" hx-swap-oob="true">' in html
    assert re.search(r'id="pref-promo-email"[^>]*checked', html) is None


def test_the_switch_shows_on_while_every_offer_is_off_and_turns_them_back_on(client):
    assert "checked" not in switch(client.get(url("u-en-1")).content.decode())
    client.post(url("u-en-1", "-marketing"), {"stopped": "on"})
    assert "checked" in switch(client.get(url("u-en-1")).content.decode())
    response = client.post(url("u-en-1", "-marketing"), {})
    assert response.status_code == 302  # without JavaScript: back to the page
    assert set(choices("u-en-1").values()) == {True} and len(choices("u-en-1")) == 4
    assert "checked" not in switch(client.get(url("u-en-1")).content.decode())


def test_turning_off_the_last_offer_by_hand_turns_the_switch_on(client):
    client.post(url("u-en-1", "-channel"), {"kind": "promo", "channel": "email"}, **HTMX)
    client.post(url("u-en-1", "-channel"), {"kind": "promo", "channel": "push"}, **HTMX)
    assert "checked" not in switch(client.get(url("u-en-1")).content.decode())  # the in-app offers still come
    response = client.post(url("u-en-1", "-channel"), {"kind": "promo", "channel": "inapp"}, **HTMX)
    html = response.content.decode()
    assert '<form id="p-marketing"' in html and 'hx-swap-oob="true"' in html
    assert "checked" in switch(html)


def test_after_stopping_marketing_an_offer_named_on_any_channel_is_suppressed(client, send):
    client.post(url("u-en-1", "-marketing"), {"stopped": "on"})
    inapp = send({"user_id": "u-en-1", "kind": "promo", "channel": "inapp", "params": {"percent": "20"}}, key="p-1")
    # promo has no SMS template yet: one approved later would find this user stopped there too.
    sms = send({"user_id": "u-en-1", "kind": "promo", "channel": "sms", "params": {"percent": "20"}}, key="p-2")
    assert [(r.status_code, r.json()["state"], r.json()["reason"]) for r in (inapp, sms)] == [
        (202, "suppressed", "opted-out"), (202, "suppressed", "opted-out"),
    ]  # fmt: skip


def test_after_stopping_marketing_an_offer_is_suppressed_and_an_update_still_goes(client, send):
    client.post(url("u-en-1", "-marketing"), {"stopped": "on"})
    promo = send({"user_id": "u-en-1", "kind": "promo", "params": {"percent": "20"}}, key="promo-1").json()
    shipped = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "5012"}}, key="order-5012").json()
    assert (promo["state"], promo["reason"]) == ("suppressed", "opted-out")
    assert shipped["state"] == "queued"
    assert Notification.objects.count() == 2


def test_the_pages_carry_the_brand_from_settings(client, settings):
    assert '<span class="p-brand">Notify</span>' in client.get(url("u-en-1")).content.decode()
    settings.BRAND_NAME, settings.BRAND_LOGO_URL = "Acme", "https://cdn.acme.example/logo.svg"
    html = client.get(url("u-en-1")).content.decode()
    assert (
        '<img class="p-logo" src="https://cdn.acme.example/logo.svg" alt="" referrerpolicy="no-referrer">Acme' in html
    )
    assert ">Notify<" not in html


@pytest.mark.parametrize(
    "raw", ["javascript:alert(1)", "data:image/png;base64,AAAA", "/static/logo.png", "https://user:pw@acme.example/l.png",
            "ftp://acme.example/logo.png", "https://"],
)  # fmt: skip
def test_a_logo_url_that_is_not_http_or_https_is_refused_at_start_up(monkeypatch, raw):
    monkeypatch.setenv("NOTIFY_BRAND_LOGO_URL", raw)
    with pytest.raises(EnvError, match="expected an absolute http:// or https:// URL without user or password"):
        env_web_url("NOTIFY_BRAND_LOGO_URL")


def test_an_https_logo_url_is_kept(monkeypatch):
    monkeypatch.setenv("NOTIFY_BRAND_LOGO_URL", "https://cdn.acme.example/logo.svg")
    assert env_web_url("NOTIFY_BRAND_LOGO_URL") == "https://cdn.acme.example/logo.svg"


def test_the_logos_site_is_the_one_other_place_pages_load_images_from():
    env = {"NOTIFY_BRAND_LOGO_URL": "https://cdn.acme.example/brand/logo.svg"}
    [policy] = settings_in(env, "CONTENT_SECURITY_POLICY['DIRECTIVES']['img-src']")
    assert policy == "[\"'self'\", 'data:', 'https://cdn.acme.example']"
