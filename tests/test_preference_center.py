"""The preference center and one-click unsubscribe, as people reach them: by signed link, without a login.

Personas (demo data): Layla (u-ar-1, Arabic, Asia/Riyadh), Sam (u-en-1, English, America/New_York)
and Dariush (u-fa-1, Persian). Kinds: otp (security: sms, email), shipped (transactional: email,
push, sms), promo (marketing: email, push).
"""

import re
from contextlib import suppress
from datetime import UTC, datetime, time, timedelta
from urllib.parse import urlsplit

import pytest
import time_machine
from django.core import signing
from django.test import Client
from django.urls import reverse

from backend.notifications import actions, links, locales
from backend.notifications.delivery import dispatch
from backend.notifications.models import Kind, Notification, Preference, Recipient
from frontend import preferences

pytestmark = pytest.mark.usefixtures("demo_data")

HTMX = {"HTTP_HX_REQUEST": "true"}
# RFC 8058 §3.2: the body a mail client posts; form-urlencoded or multipart.
ONE_CLICK, FORM = "List-Unsubscribe=One-Click", "application/x-www-form-urlencoded"
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
WEEK = timedelta(days=7)


@pytest.fixture(autouse=True)
def frozen_clock():
    """A signed token carries the second it was made: tests build links more than once and compare them.

    Two builds straddling a second boundary differ, so the clock stands still at ``NOW``; tests about
    expiry travel further inside it.
    """
    with time_machine.travel(NOW, tick=False):
        yield


def page_url(user_id: str) -> str:
    return reverse("frontend:preferences", args=[links.preference_token(user_id)])


def action_url(name: str, user_id: str) -> str:
    return reverse(f"frontend:preferences-{name}", args=[links.preference_token(user_id)])


def unsubscribe_url(user_id: str, kind: str = "promo", name: str = "unsubscribe") -> str:
    return reverse(f"frontend:{name}", args=[links.unsubscribe_token(user_id, kind)])


def tampered(token: str) -> str:
    return token[:-1] + ("A" if token[-1] != "A" else "B")


def preference(user_id: str, kind: str, channel: str) -> bool | None:
    row = Preference.objects.filter(recipient__user_id=user_id, kind__name=kind, channel=channel).first()
    return None if row is None else row.enabled


def layla() -> Recipient:
    return Recipient.objects.get(user_id="u-ar-1")


# The page


def test_a_signed_link_opens_the_page_in_arabic_right_to_left(client):
    response = client.get(page_url("u-ar-1"))
    assert response.status_code == 200
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "<h1>إعدادات الإشعارات</h1>" in html
    assert "لا يمكن إيقاف رسائل الأمان" in html
    assert response["Content-Language"] == "ar"


def test_english_is_left_to_right_and_persian_right_to_left(client):
    english = client.get(page_url("u-en-1")).content.decode()
    assert '<html lang="en" dir="ltr">' in english
    assert "<h1>Notification settings</h1>" in english
    persian = client.get(page_url("u-fa-1")).content.decode()
    assert '<html lang="fa" dir="rtl">' in persian
    assert "<h1>تنظیمات اعلان</h1>" in persian


@pytest.mark.parametrize("marks", [("", "\u2069"), ("\u2068", "\u2069"), ("\u200f", "")])
def test_a_link_a_mail_client_took_with_the_footers_direction_marks_still_opens(client, marks):
    """The plain-text footer of right-to-left mail isolates each URL (U+2068 … U+2069); a client may link them too."""
    token = links.preference_token("u-ar-1")
    marked = reverse("frontend:preferences", args=[f"{marks[0]}{token}{marks[1]}"])
    assert "%E2%81%A9" in marked or "%E2%80%8F" in marked

    response = client.get(f"{marked}?from=mail")

    assert (response.status_code, response["Location"]) == (
        302,
        reverse("frontend:preferences", args=[token]) + "?from=mail",
    )
    assert client.get(response["Location"]).status_code == 200


def test_the_page_is_never_cached_varies_on_htmx_and_keeps_the_link_from_other_sites(client):
    response = client.get(page_url("u-en-1"))
    assert "no-store" in response["Cache-Control"]
    assert "HX-Request" in response["Vary"]
    assert response["Referrer-Policy"] == "same-origin"
    assert b'<meta name="referrer" content="same-origin">' in response.content


def test_it_shows_every_kind_by_category_times_its_channels(client):
    html = client.get(page_url("u-en-1")).content.decode()
    switches = re.findall(r'<input id="pref-([a-z]+)-([a-z]+)"', html)
    # Each kind's routing channels, then the in-app inbox it has approved templates for: a caller may name it.
    assert switches == [
        ("otp", "sms"), ("otp", "email"), ("otp", "inapp"),
        ("shipped", "email"), ("shipped", "push"), ("shipped", "sms"), ("shipped", "inapp"),
        ("promo", "email"), ("promo", "push"), ("promo", "inapp"),
    ]  # fmt: skip
    headings = re.findall(r"<h3>(.*?)</h3>", html)
    assert headings == ["Security", "Updates", "Offers and news"]
    assert "pref-digest" not in html  # what rate-limited notifications fold into: not a choice of its own


def test_security_kinds_are_locked_with_the_reason(client):
    html = client.get(page_url("u-en-1")).content.decode()
    otp_sms = re.search(r'<input id="pref-otp-sms"[^>]*>', html, re.S).group(0)
    assert " disabled" in otp_sms and " checked" in otp_sms
    assert 'aria-describedby="lock-otp"' in otp_sms
    assert re.search(r'id="lock-otp">.*?Security messages can\'t be turned off', html, re.S)
    promo_email = re.search(r'<input id="pref-promo-email"[^>]*>', html, re.S).group(0)
    assert " disabled" not in promo_email


def test_a_switch_shows_the_stored_choice(client):
    actions.set_preference(layla(), Kind.objects.get(name="promo"), "push", False, by=actions.BY_PREFERENCE_CENTER)
    html = client.get(page_url("u-ar-1")).content.decode()
    assert " checked" not in re.search(r'<input id="pref-promo-push"[^>]*>', html, re.S).group(0)
    assert " checked" in re.search(r'<input id="pref-promo-email"[^>]*>', html, re.S).group(0)


def test_the_page_costs_a_fixed_number_of_queries(client, django_assert_num_queries):
    url = page_url("u-en-1")
    with django_assert_num_queries(4):  # recipient, preferences, kinds, the channels of their approved templates
        client.get(url)


def test_the_time_zone_picker_lists_each_place_once_grouped_by_region(client):
    html = client.get(page_url("u-ar-1")).content.decode()
    picker = re.search(r'<select id="p-tz".*?</select>', html, re.S).group(0)
    values = re.findall(r'<option value="([^"]+)"', picker)
    assert sorted(values) == sorted(locales.listed_time_zones())
    # tzdata's links and legacy names: the same city two to four times, or no city at all.
    for name in ("Asia/Calcutta", "America/Montreal", "Asia/Harbin", "Europe/Kiev", "W-SU", "CST6CDT", "Etc/GMT+1",
                 "US/Eastern", "Factory", "localtime"):  # fmt: skip
        assert name not in values
    assert {"Asia/Kolkata", "America/Toronto", "Asia/Shanghai", "Europe/Kyiv", "UTC"} <= set(values)
    for group in re.findall(r"<optgroup.*?</optgroup>", picker, re.S):
        labels = re.findall(r"<option [^>]*>([^<]+)</option>", group)
        assert len(labels) == len(set(labels)), [label for label in labels if labels.count(label) > 1]
    # CLDR's names of the cities (Babel), the offset isolated so that it keeps its order in RTL.
    assert '<option value="Asia/Riyadh" selected>الرياض (\u2068UTC+03:00\u2069)</option>' in picker
    assert '<optgroup label="آسيا">' in picker
    assert '<option value="America/Argentina/Buenos_Aires">بوينوس أيرس (\u2068UTC-03:00\u2069)</option>' in picker


def test_every_area_listed_has_a_translated_label_and_no_label_is_for_an_area_not_listed():
    """``locales.PLACE_AREAS`` decides which zones are listed; ``REGION_LABELS`` names their groups."""
    assert set(preferences.REGION_LABELS) == locales.PLACE_AREAS


def test_a_user_on_a_legacy_zone_still_finds_it_selected(client):
    Recipient.objects.filter(user_id="u-en-1").update(time_zone="US/Eastern")  # accepted by the API, not listed
    html = client.get(page_url("u-en-1")).content.decode()
    assert re.search(r'<option value="US/Eastern" selected>US / Eastern \(UTC-0[45]:00\)</option>', html)


def test_the_persian_page_names_the_zones_in_persian(client):
    Recipient.objects.filter(user_id="u-fa-1").update(time_zone="Asia/Tehran")
    html = client.get(page_url("u-fa-1")).content.decode()
    assert '<option value="Asia/Tehran" selected>تهران (\u2068UTC+03:30\u2069)</option>' in html


def test_the_persian_zones_are_in_the_persian_alphabets_order(client):
    """Code-point order put پ چ ژ گ after ی: کابل (Kabul) came after یاکوتسک (Yakutsk)."""
    html = client.get(page_url("u-fa-1")).content.decode()
    asia = re.search(r'<optgroup label="آسیا">(.*?)</optgroup>', html, re.S).group(1)
    names = [label.split(" (")[0] for label in re.findall(r"<option [^>]*>([^<]+)</option>", asia)]
    # Baghdad, Phnom Penh, Tehran, Chita, Kabul, Yakutsk.
    places = ["بغداد", "پنوم‌پن", "تهران", "چیتا", "کابل", "یاکوتسک"]
    assert sorted(places, key=names.index) == places


@pytest.mark.parametrize(
    ("words", "ordered"),
    [
        (["یاکوتسک", "کابل", "گوام", "پنوم‌پن", "بغداد"], ["بغداد", "پنوم‌پن", "کابل", "گوام", "یاکوتسک"]),
        (["zagreb", "Amsterdam", "Ürümqi", "berlin"], ["Amsterdam", "berlin", "Ürümqi", "zagreb"]),
        (["ژوهانسبورگ", "زاگرب", "چیتا", "جاکارتا"], ["جاکارتا", "چیتا", "زاگرب", "ژوهانسبورگ"]),
    ],
)
def test_collation_orders_as_readers_of_each_alphabet_expect(words, ordered):
    assert sorted(words, key=locales.collation_key) == ordered


def test_the_english_page_keeps_the_iana_names(client):
    html = client.get(page_url("u-en-1")).content.decode()
    assert '<option value="America/Argentina/Buenos_Aires">Argentina / Buenos Aires (UTC-03:00)</option>' in html


# Tampered and expired links


def test_a_tampered_link_gets_a_400_page_in_english(client):
    token = links.preference_token("u-ar-1")
    response = client.get(reverse("frontend:preferences", args=[tampered(token)]))
    assert response.status_code == 400
    html = response.content.decode()
    assert '<html lang="en" dir="ltr">' in html
    assert "<h1>This link is not valid</h1>" in html
    assert "Open it again from the message you received, or ask for a new link." in html


def test_an_unsubscribe_token_does_not_open_the_preference_center(client):
    token = links.unsubscribe_token("u-ar-1", "promo")
    assert client.get(reverse("frontend:preferences", args=[token])).status_code == 400
    response = client.post(reverse("frontend:preferences-channel", args=[token]), {"kind": "promo", "channel": "push"})
    assert response.status_code == 400
    assert preference("u-ar-1", "promo", "push") is None


def test_an_expired_link_gets_a_410_page_in_the_users_language(client):
    with time_machine.travel(NOW, tick=False):
        url = page_url("u-ar-1")
    with time_machine.travel(NOW + WEEK - timedelta(seconds=1), tick=False):
        assert client.get(url).status_code == 200
    with time_machine.travel(NOW + WEEK + timedelta(seconds=1), tick=False):
        response = client.get(url)
    assert response.status_code == 410
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "<h1>انتهت صلاحية هذا الرابط</h1>" in html
    assert "اطلب رابطًا جديدًا" in html


def test_an_expired_link_of_an_english_user_says_so_in_english(client):
    with time_machine.travel(NOW, tick=False):
        url = page_url("u-en-1")
    with time_machine.travel(NOW + WEEK + timedelta(minutes=1), tick=False):
        response = client.get(url)
    assert response.status_code == 410
    assert "<h1>This link has expired</h1>" in response.content.decode()
    assert "Ask for a new link" in response.content.decode()


def test_a_change_through_an_expired_link_is_refused_in_the_status_region(client):
    with time_machine.travel(NOW, tick=False):
        url = action_url("channel", "u-en-1")
    with time_machine.travel(NOW + WEEK + timedelta(minutes=1), tick=False):
        response = client.post(url, {"kind": "promo", "channel": "email"}, **HTMX)
    assert response.status_code == 410
    assert "This link has expired." in response.content.decode()
    assert preference("u-en-1", "promo", "email") is None


# Changes


def test_turning_a_channel_off_and_on_stores_it_and_says_saved_in_arabic(client):
    url = action_url("channel", "u-ar-1")
    response = client.post(url, {"kind": "promo", "channel": "email"}, **HTMX)  # the unchecked switch
    assert response.status_code == 200
    assert "تم الحفظ" in response.content.decode()
    assert "HX-Request" in response["Vary"]
    assert preference("u-ar-1", "promo", "email") is False
    client.post(url, {"kind": "promo", "channel": "email", "enabled": "on"}, **HTMX)
    assert preference("u-ar-1", "promo", "email") is True


def test_without_htmx_a_change_goes_back_to_the_page(client):
    url = action_url("channel", "u-en-1")
    response = client.post(url, {"kind": "shipped", "channel": "sms"})
    assert response.status_code == 302
    assert response["Location"] == page_url("u-en-1")
    assert preference("u-en-1", "shipped", "sms") is False


def test_a_security_kind_cannot_be_turned_off(client):
    response = client.post(action_url("channel", "u-en-1"), {"kind": "otp", "channel": "sms"}, **HTMX)
    assert response.status_code == 403
    assert "Security messages can&#x27;t be turned off." in response.content.decode()
    assert preference("u-en-1", "otp", "sms") is None


def test_a_security_kind_refusal_without_htmx_is_a_page(client):
    response = client.post(action_url("channel", "u-ar-1"), {"kind": "otp", "channel": "email"})
    assert response.status_code == 403
    assert "لا يمكن إيقاف رسائل الأمان." in response.content.decode()
    assert preference("u-ar-1", "otp", "email") is None


def test_a_channel_the_kind_does_not_use_and_an_unknown_kind_are_refused(client):
    url = action_url("channel", "u-en-1")
    assert client.post(url, {"kind": "promo", "channel": "sms"}, **HTMX).status_code == 422
    assert client.post(url, {"kind": "nope", "channel": "email"}, **HTMX).status_code == 404
    # The digest, which the page does not show: off, it would drop every message folded into it.
    assert client.post(url, {"kind": "digest", "channel": "email"}, **HTMX).status_code == 404
    assert not Preference.objects.exists()


def test_changes_need_the_csrf_token_the_page_hands_to_htmx():
    client = Client(enforce_csrf_checks=True)
    html = client.get(page_url("u-en-1")).content.decode()
    csrf = re.search(r"hx-headers='\{\"X-CSRFToken\": \"([^\"]+)\"\}'", html).group(1)
    url = action_url("channel", "u-en-1")
    assert client.post(url, {"kind": "promo", "channel": "push"}, **HTMX).status_code == 403
    assert client.post(url, {"kind": "promo", "channel": "push"}, HTTP_X_CSRFTOKEN=csrf, **HTMX).status_code == 200
    assert preference("u-en-1", "promo", "push") is False


def test_quiet_hours_are_saved_and_turned_off(client):
    url = action_url("quiet-hours", "u-ar-1")
    response = client.post(url, {"enabled": "on", "start": "22:30", "end": "06:15"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "تم الحفظ" in html
    assert '<fieldset id="p-quiet-times" class="p-times" hx-swap-oob="true">' in html
    recipient = layla()
    assert (recipient.quiet_hours_start, recipient.quiet_hours_end) == (time(22, 30), time(6, 15))

    response = client.post(url, {"enabled": "on", "start": "23:00", "end": "06:15"}, **HTMX)
    assert response.status_code == 200
    assert "p-quiet-times" not in response.content.decode()  # never swap the inputs under the person's cursor
    assert layla().quiet_hours_start == time(23, 0)

    response = client.post(url, {}, **HTMX)
    assert response.status_code == 200
    assert '<fieldset id="p-quiet-times" class="p-times" disabled hx-swap-oob="true">' in response.content.decode()
    recipient.refresh_from_db()
    assert (recipient.quiet_hours_start, recipient.quiet_hours_end) == (None, None)


def test_quiet_hours_typed_in_persian_digits_are_read(client):
    """A browser without a time picker sends what the person typed: ۲۲:۳۰ from a Persian keyboard."""
    response = client.post(
        action_url("quiet-hours", "u-ar-1"), {"enabled": "on", "start": "۲۲:۳۰", "end": "٠٦:١٥"}, **HTMX
    )
    assert response.status_code == 200
    recipient = layla()
    assert (recipient.quiet_hours_start, recipient.quiet_hours_end) == (time(22, 30), time(6, 15))


def test_switching_quiet_hours_on_without_times_uses_22_to_07(client):
    client.post(action_url("quiet-hours", "u-en-1"), {"enabled": "on"}, **HTMX)
    recipient = Recipient.objects.get(user_id="u-en-1")
    assert (recipient.quiet_hours_start, recipient.quiet_hours_end) == (time(22, 0), time(7, 0))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"enabled": "on", "start": "22:00", "end": "22:00"}, "must end at a different time than they start."),
        ({"enabled": "on", "start": "", "end": "07:00"}, "Enter a start and an end time."),
        ({"enabled": "on", "start": "25:00", "end": "07:00"}, "Enter a start and an end time."),
    ],
)
def test_impossible_quiet_hours_are_refused(client, data, message):
    response = client.post(action_url("quiet-hours", "u-en-1"), data, **HTMX)
    assert response.status_code == 422
    assert message in response.content.decode()
    assert Recipient.objects.get(user_id="u-en-1").quiet_hours_start is None


def test_the_time_zone_is_saved_and_the_local_time_shown(client):
    with time_machine.travel(NOW, tick=False):
        response = client.post(action_url("time-zone", "u-ar-1"), {"time_zone": "Asia/Kolkata"}, **HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "تم الحفظ" in html
    assert '<bdi id="p-local-time" hx-swap-oob="true">15:30</bdi>' in html  # 10:00 UTC is 15:30 in India
    assert layla().time_zone == "Asia/Kolkata"


def test_an_unknown_time_zone_is_refused(client):
    response = client.post(action_url("time-zone", "u-ar-1"), {"time_zone": "Factory"}, **HTMX)
    assert response.status_code == 422
    assert "اختر منطقة زمنية من القائمة." in response.content.decode()
    assert layla().time_zone == "Asia/Riyadh"


def test_a_new_language_reloads_the_page_in_it(client):
    response = client.post(action_url("language", "u-en-1"), {"language": "ar"}, **HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == page_url("u-en-1") + "?saved=language"
    assert Recipient.objects.get(user_id="u-en-1").language == "ar"
    html = client.get(response["HX-Redirect"]).content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "تم الحفظ" in html


def test_an_unknown_language_is_refused(client):
    response = client.post(action_url("language", "u-en-1"), {"language": "klingon"}, **HTMX)
    assert response.status_code == 422
    assert Recipient.objects.get(user_id="u-en-1").language == "en"


# One-click unsubscribe (RFC 8058)


def test_a_one_click_post_turns_the_kinds_email_off_with_no_page_and_no_login():
    mail_client = Client(enforce_csrf_checks=True)  # a mail provider posting from elsewhere: no cookie, no token
    response = mail_client.post(unsubscribe_url("u-ar-1"), ONE_CLICK, content_type=FORM)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert len(response.content) < 20
    assert preference("u-ar-1", "promo", "email") is False
    assert preference("u-ar-1", "promo", "push") is None  # only that kind's email


def test_each_way_of_changing_a_preference_records_who_did(client, api):
    """What the support trail says when a message is stopped: the person, their mail client, or a service."""

    def changed_by(user_id: str, kind: str, channel: str) -> str:
        return Preference.objects.get(recipient__user_id=user_id, kind__name=kind, channel=channel).changed_by

    client.post(action_url("channel", "u-en-1"), {"kind": "promo", "channel": "push"}, **HTMX)
    assert changed_by("u-en-1", "promo", "push") == "the user, in the preference center"
    client.post(action_url("marketing", "u-fa-1"), {"stopped": "on"}, **HTMX)
    assert changed_by("u-fa-1", "promo", "email") == 'the user, with "stop all marketing" in the preference center'
    Client().post(unsubscribe_url("u-ar-1"), ONE_CLICK, content_type=FORM)
    assert changed_by("u-ar-1", "promo", "email") == "the user's mail client, by one-click unsubscribe (RFC 8058)"
    client.post(unsubscribe_url("u-ar-1", name="unsubscribe-undo"))
    assert changed_by("u-ar-1", "promo", "email") == "the user, on the unsubscribe page of an email"
    api.put("/api/v1/users/u-ar-1/preferences", {"channels": {"promo": {"push": False}}}, format="json")
    assert changed_by("u-ar-1", "promo", "push") == "API client orders"


def test_a_service_repeating_the_users_choice_leaves_who_made_it_and_when(client, api):
    client.post(action_url("channel", "u-ar-1"), {"kind": "promo", "channel": "email"}, **HTMX)  # off
    before = Preference.objects.get(recipient__user_id="u-ar-1", kind__name="promo", channel="email")

    api.put("/api/v1/users/u-ar-1/preferences", {"channels": {"promo": {"email": False}}}, format="json")

    after = Preference.objects.get(pk=before.pk)
    assert (after.enabled, after.changed_by, after.updated_at) == (False, before.changed_by, before.updated_at)
    assert after.changed_by == "the user, in the preference center"


def test_stop_all_marketing_leaves_the_digest_even_filed_as_marketing(client):
    """The digest follows the kinds it gathers: a kind edited into marketing in the admin made this a 500."""
    Kind.objects.filter(name="digest").update(category="marketing", opt_out_allowed=True)
    response = client.post(action_url("marketing", "u-en-1"), {"stopped": "on"}, **HTMX)
    assert response.status_code == 200
    assert not Preference.objects.filter(kind__name="digest").exists()
    assert preference("u-en-1", "promo", "email") is False


def test_one_click_also_accepts_multipart_bodies():
    response = Client().post(unsubscribe_url("u-en-1"), {"List-Unsubscribe": "One-Click"})  # the test client's default
    assert response.status_code == 200
    assert preference("u-en-1", "promo", "email") is False


@pytest.mark.parametrize("body", [{}, {"List-Unsubscribe": "Yes"}, {"unsubscribe": "One-Click"}])
def test_one_click_refuses_any_other_body(client, body):
    response = client.post(unsubscribe_url("u-en-1"), body)
    assert response.status_code == 400
    assert response.content == b"Expected the body List-Unsubscribe=One-Click (RFC 8058).\n"
    assert preference("u-en-1", "promo", "email") is None


def test_one_click_with_a_tampered_token_or_an_expired_signed_one_is_refused(client):
    token = links.unsubscribe_token("u-en-1", "promo")
    url = reverse("frontend:unsubscribe", args=[tampered(token)])
    assert client.post(url, {"List-Unsubscribe": "One-Click"}).status_code == 400
    # A signed token of mail sent before the opaque ones works until NOTIFY_UNSUBSCRIBE_LINK_TTL, then says so.
    with time_machine.travel(NOW, tick=False):
        old = signing.dumps({"u": "u-en-1", "k": "promo", "c": "email"}, salt="notify.unsubscribe", compress=True)
    with time_machine.travel(NOW + timedelta(days=366), tick=False):
        response = client.post(reverse("frontend:unsubscribe", args=[old]), {"List-Unsubscribe": "One-Click"})
        assert response.status_code == 410
    assert preference("u-en-1", "promo", "email") is None


def test_an_opaque_token_still_works_a_year_later(client):
    with time_machine.travel(NOW, tick=False):
        url = unsubscribe_url("u-en-1")
    with time_machine.travel(NOW + timedelta(days=366), tick=False):
        assert client.post(url, {"List-Unsubscribe": "One-Click"}).status_code == 200
    assert preference("u-en-1", "promo", "email") is False


def test_get_changes_nothing_and_asks_first(client):
    # Mail software fetches header URLs on its own: that is why RFC 8058 moved the click to POST.
    response = client.get(unsubscribe_url("u-en-1"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Stop “Marketing offer” emails?</h1>" in html
    assert f'action="{unsubscribe_url("u-en-1", name="unsubscribe-confirm")}"' in html
    assert preference("u-en-1", "promo", "email") is None


def test_confirming_then_undoing_in_the_browser(client):
    confirmed = client.post(unsubscribe_url("u-en-1", name="unsubscribe-confirm"), follow=True)
    assert preference("u-en-1", "promo", "email") is False
    html = confirmed.content.decode()
    assert "<h1>You won't get “Marketing offer” emails any more</h1>" in html
    assert f'action="{unsubscribe_url("u-en-1", name="unsubscribe-undo")}"' in html
    assert "To change your other notification settings, open them from the app or our website." in html

    undone = client.post(unsubscribe_url("u-en-1", name="unsubscribe-undo"), follow=True)
    assert preference("u-en-1", "promo", "email") is True
    assert "<h1>You'll get “Marketing offer” emails again</h1>" in undone.content.decode()


def test_after_a_one_click_the_page_confirms_in_arabic_with_undo(client):
    client.post(unsubscribe_url("u-ar-1"), {"List-Unsubscribe": "One-Click"})
    response = client.get(unsubscribe_url("u-ar-1"))
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "<h1>لن تصلك رسائل البريد الإلكتروني «العروض التسويقية» بعد الآن</h1>" in html
    assert ">تراجع</button>" in html
    assert "لتغيير إعدادات الإشعارات الأخرى، افتحها من التطبيق أو من موقعنا." in html


def _preference_tokens_in(html: str) -> list[str]:
    """Every signed value in the page that the preference center would accept."""
    found = []
    for candidate in set(re.findall(r"[\w-]+:[\w-]+:[\w-]+", html)):
        with suppress(links.LinkError):
            links.preference_user(candidate)
            found.append(candidate)
    return found


@pytest.mark.parametrize("one_click_first", [False, True], ids=["asking", "unsubscribed"])
def test_the_unsubscribe_page_hands_out_no_preference_center_link(client, one_click_first):
    # The token is scoped to one kind on one channel: a forwarded promo mail must not open every setting.
    if one_click_first:
        client.post(unsubscribe_url("u-en-1"), {"List-Unsubscribe": "One-Click"})
    html = client.get(unsubscribe_url("u-en-1")).content.decode()
    assert "/preferences/" not in html
    assert _preference_tokens_in(html) == []


def test_a_preference_token_does_not_reach_the_unsubscribe_pages(client):
    token = links.preference_token("u-en-1")
    url = reverse("frontend:unsubscribe", args=[token])
    assert client.get(url).status_code == 400
    assert client.post(url, {"List-Unsubscribe": "One-Click"}).status_code == 400
    assert client.post(reverse("frontend:unsubscribe-confirm", args=[token])).status_code == 400
    assert preference("u-en-1", "promo", "email") is None


def test_the_unsubscribe_page_of_a_tampered_link_is_a_400_page(client):
    token = tampered(links.unsubscribe_token("u-en-1", "promo"))
    response = client.get(reverse("frontend:unsubscribe", args=[token]))
    assert response.status_code == 400
    assert "<h1>This link is not valid</h1>" in response.content.decode()


# The headers in real mail


def _deliver(send, user_id: str, kind: str, params: dict, key: str) -> None:
    response = send({"user_id": user_id, "kind": kind, "channel": "email", "params": params}, key=key)
    assert response.status_code == 202, response.json()
    dispatch.deliver(response.json()["id"])


def test_marketing_mail_carries_one_click_unsubscribe_that_works(send, smtp_sink, client):
    _deliver(send, "u-en-1", "promo", {"percent": "20"}, "promo-2026-11")
    [mail] = smtp_sink.messages()
    token = links.unsubscribe_token("u-en-1", "promo")
    https, mailto = (part.strip().strip("<>") for part in mail["List-Unsubscribe"].split(","))
    assert https == f"http://127.0.0.1:8000/unsubscribe/{token}"
    assert mailto == f"mailto:unsubscribe@localhost?subject=unsubscribe%20{token}"
    assert mail["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"

    # What a mail client does when the person presses its Unsubscribe button.
    response = Client(enforce_csrf_checks=True).post(urlsplit(https).path, ONE_CLICK, content_type=FORM)
    assert response.status_code == 200
    assert preference("u-en-1", "promo", "email") is False
    _deliver(send, "u-en-1", "promo", {"percent": "30"}, "promo-2026-12")
    assert Notification.objects.get(idempotency_key="promo-2026-12").reason == "opted-out"


def test_transactional_mail_carries_no_unsubscribe_headers(send, smtp_sink):
    _deliver(send, "u-en-1", "shipped", {"order": "5012"}, "order-5012-shipped")
    [mail] = smtp_sink.messages()
    assert mail["List-Unsubscribe"] is None
    assert mail["List-Unsubscribe-Post"] is None
