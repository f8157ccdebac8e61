"""Pages in the reader's language and direction: link errors by Accept-Language, the admin's dir="auto"."""

import pytest
from django.contrib.auth.models import User
from django.core import signing
from django.urls import reverse
from django.utils import translation

from backend.notifications import links
from backend.notifications.models import Recipient

pytestmark = pytest.mark.usefixtures("demo_data")


def _tampered_preference_link() -> str:
    token = links.preference_token("u-en-1")
    return reverse("frontend:preferences", args=[token[:-1] + ("A" if token[-1] != "A" else "B")])


@pytest.mark.parametrize(
    ("accept", "lang", "direction", "title"),
    [
        ("ar,en;q=0.5", "ar", "rtl", "هذا الرابط غير صالح"),
        ("fa-IR,fa;q=0.9", "fa", "rtl", "این پیوند معتبر نیست"),
        ("ps,fa;q=0.8", "fa", "rtl", "این پیوند معتبر نیست"),
        ("de-DE,de;q=0.9", "en", "ltr", "This link is not valid"),
        ("", "en", "ltr", "This link is not valid"),
    ],
)
def test_a_broken_link_answers_in_the_browsers_language(client, accept, lang, direction, title):
    response = client.get(_tampered_preference_link(), HTTP_ACCEPT_LANGUAGE=accept)
    html = response.content.decode()
    assert response.status_code == 400
    assert f'<html lang="{lang}" dir="{direction}">' in html
    assert f"<h1>{title}</h1>" in html
    assert response["Content-Language"] == lang
    assert "Accept-Language" in response["Vary"]


def test_a_broken_inbox_link_answers_in_the_browsers_language_too(client):
    response = client.get("/inbox/not-a-link/", HTTP_ACCEPT_LANGUAGE="ar")
    assert response.status_code == 400
    assert '<html lang="ar" dir="rtl">' in response.content.decode()


def test_an_expired_link_still_answers_in_its_owners_language(client, settings):
    token = signing.dumps({"u": "u-fa-1"}, salt="notify.preference-link", compress=True)
    settings.NOTIFY = {**settings.NOTIFY, "PREFERENCE_LINK_TTL": -1}
    response = client.get(reverse("frontend:preferences", args=[token]), HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 410
    assert '<html lang="fa" dir="rtl">' in response.content.decode()


def test_the_admin_shows_text_fields_with_dir_auto(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "x"))
    recipient = Recipient.objects.get(user_id="u-ar-1")
    html = client.get(f"/admin/notifications/recipient/{recipient.pk}/change/").content.decode()
    assert '<input type="text" name="user_id" value="u-ar-1" class="vTextField" dir="auto"' in html
    assert '<input type="text" name="time_zone" value="Asia/Riyadh" class="vTextField" dir="auto"' in html
    assert 'href="/static/frontend/admin-direction.css"' in html
    listing = client.get("/admin/notifications/notification/").content.decode()
    assert 'href="/static/frontend/admin-direction.css"' in listing


@pytest.mark.parametrize(("language", "bidi"), [("ps", True), ("ckb", True), ("ug", True), ("dv", True), ("en", False)])
def test_django_asks_cldr_which_languages_are_bidi(language, bidi):
    # settings.LANGUAGES_BIDI decides dir in every page that asks Django (the admin's, base.html, the inbox).
    with translation.override(language):
        assert translation.get_language_bidi() is bidi


@pytest.mark.parametrize(("language", "name"), [("ps", "پښتو"), ("ckb", "کوردیی ناوەندی"), ("ug", "ئۇيغۇرچە")])
def test_the_preference_center_of_a_language_django_does_not_know_opens_right_to_left(client, language, name):
    Recipient.objects.create(user_id=f"u-{language}", email="x@example.com", language=language, time_zone="Asia/Kabul")
    response = client.get(reverse("frontend:preferences", args=[links.preference_token(f"u-{language}")]))
    html = response.content.decode()
    assert response.status_code == 200
    assert f'<html lang="{language}" dir="rtl">' in html
    assert f'<option value="{language}" lang="{language}" selected>{name}</option>' in html


@pytest.mark.parametrize("path", ["/", "/templates/", "/campaigns/segments/", "/support/", "/support/dashboard/"])
def test_staff_pages_are_english_left_to_right_whatever_the_browser_asks(client, path):
    client.force_login(User.objects.get(username="admin"))
    response = client.get(path, HTTP_ACCEPT_LANGUAGE="ar")
    assert response.status_code == 200
    assert '<html lang="en" dir="ltr">' in response.content.decode()
    assert response["Content-Language"] == "en"


def test_the_admin_and_a_staff_pages_403_keep_the_browsers_language(client):
    client.force_login(User.objects.get(username="support"))
    forbidden = client.get("/templates/edit/", HTTP_ACCEPT_LANGUAGE="fa")
    assert (forbidden.status_code, forbidden["Content-Language"]) == (403, "fa")
    assert '<html lang="fa" dir="rtl">' in forbidden.content.decode()
    admin = client.get("/admin/", HTTP_ACCEPT_LANGUAGE="ar").content.decode()
    assert '<html lang="ar" dir="rtl">' in admin
