"""Layla (u-ar-1, Arabic) manages her notifications in Chromium from a signed link; broken links say why."""

import io
from datetime import timedelta

import pytest
import time_machine
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import expect

from backend.notifications import links
from backend.notifications.models import Preference, Recipient

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def people(live_server):
    call_command("demo_data", stdout=io.StringIO())


def preferences_url(live_server, user_id: str, token: str | None = None) -> str:
    return live_server.url + reverse("frontend:preferences", args=[token or links.preference_token(user_id)])


def stored(user_id: str, kind: str, channel: str) -> bool | None:
    row = Preference.objects.filter(recipient__user_id=user_id, kind__name=kind, channel=channel).first()
    return None if row is None else row.enabled


def test_layla_turns_a_channel_off_on_a_right_to_left_page(live_server, page, screenshot, people):
    page.goto(preferences_url(live_server, "u-ar-1"))
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("html")).to_have_attribute("lang", "ar")
    expect(page.locator("h1")).to_have_text("إعدادات الإشعارات")
    expect(page.locator("#lock-otp")).to_have_text("لا يمكن إيقاف رسائل الأمان")
    expect(page.get_by_role("switch", name="رمز الدخول لمرة واحدة الرسائل النصية")).to_be_disabled()

    switch = page.get_by_role("switch", name="العروض التسويقية البريد الإلكتروني", exact=True)
    expect(switch).to_be_checked()
    # Right to left for real: the switch sits to the right of its label, the heading hugs the right edge.
    track = page.locator("form:has(#pref-promo-email) .p-track").bounding_box()
    label = page.locator("#pref-promo-email-label").bounding_box()
    assert track["x"] > label["x"] + label["width"] - 1
    main = page.locator("main").bounding_box()
    heading = page.locator("h1").bounding_box()
    assert main["x"] + main["width"] - (heading["x"] + heading["width"]) < 40
    screenshot("preferences-ar")

    switch.click()
    status = page.locator("form:has(#pref-promo-email) [role=status]")
    expect(status).to_have_text("تم الحفظ")
    expect(switch).not_to_be_checked()
    assert stored("u-ar-1", "promo", "email") is False
    assert stored("u-ar-1", "promo", "push") is None
    screenshot("preferences-ar-saved")

    page.reload()
    expect(page.get_by_role("switch", name="العروض التسويقية البريد الإلكتروني", exact=True)).not_to_be_checked()


def test_quiet_hours_and_time_zone_are_saved_from_the_page(live_server, page, screenshot, people):
    page.goto(preferences_url(live_server, "u-ar-1"))
    quiet = page.locator("form:has(#p-quiet-times)")
    expect(quiet.locator("input[name=start]")).to_be_disabled()
    quiet.get_by_role("switch").click()
    expect(quiet.locator("[role=status]")).to_have_text("تم الحفظ")
    expect(quiet.locator("input[name=start]")).to_be_enabled()
    quiet.locator("input[name=start]").fill("23:30")
    expect(quiet.locator("[role=status]")).to_have_text("تم الحفظ")
    recipient = Recipient.objects.get(user_id="u-ar-1")
    assert (recipient.quiet_hours_start.isoformat(), recipient.quiet_hours_end.isoformat()) == ("23:30:00", "07:00:00")

    page.locator("#p-tz").select_option("Asia/Kolkata")
    tz_form = page.locator("form:has(#p-tz)")
    expect(tz_form.locator("[role=status]")).to_have_text("تم الحفظ")
    india_now = timezone.localtime(timezone=timezone.get_fixed_timezone(330)).strftime("%H:%M")
    expect(page.locator("#p-local-time")).to_have_text(india_now)
    assert Recipient.objects.get(user_id="u-ar-1").time_zone == "Asia/Kolkata"
    screenshot("preferences-ar-quiet-hours")


def test_sam_sees_it_in_english_left_to_right(live_server, page, screenshot, people):
    page.goto(preferences_url(live_server, "u-en-1"))
    expect(page.locator("html")).to_have_attribute("dir", "ltr")
    expect(page.locator("h1")).to_have_text("Notification settings")
    screenshot("preferences-en")
    page.locator("#p-language").select_option("fa")
    expect(page.locator("html")).to_have_attribute("lang", "fa")
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("form:has(#p-language) [role=status]")).to_have_text("ذخیره شد")
    assert Recipient.objects.get(user_id="u-en-1").language == "fa"


def test_the_page_works_on_a_phone(live_server, page, screenshot, people):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(preferences_url(live_server, "u-ar-1"))
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page scrolls sideways on a phone ({width}px)"
    screenshot("preferences-ar-phone")


def test_a_tampered_link_shows_that_it_is_not_valid(live_server, page, screenshot, people):
    token = links.preference_token("u-ar-1")
    response = page.goto(preferences_url(live_server, "u-ar-1", token[:-1] + ("A" if token[-1] != "A" else "B")))
    assert response.status == 400
    expect(page.locator("h1")).to_have_text("This link is not valid")
    screenshot("preferences-link-invalid")


def test_an_expired_link_says_so_in_the_users_language(live_server, page, screenshot, people):
    with time_machine.travel(timezone.now() - timedelta(days=8)):
        url = preferences_url(live_server, "u-ar-1")
    response = page.goto(url)
    assert response.status == 410
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("h1")).to_have_text("انتهت صلاحية هذا الرابط")
    screenshot("preferences-link-expired-ar")


def test_one_click_unsubscribe_then_undo_from_the_page(live_server, page, screenshot, people):
    url = live_server.url + reverse("frontend:unsubscribe", args=[links.unsubscribe_token("u-ar-1", "promo")])
    page.goto(url)  # opening the link changes nothing: it asks
    expect(page.get_by_role("button", name="إلغاء الاشتراك")).to_be_visible()
    assert stored("u-ar-1", "promo", "email") is None
    screenshot("unsubscribe-ask-ar")

    # What a mail client posts when the person presses its Unsubscribe button (RFC 8058).
    answer = page.request.post(url, form={"List-Unsubscribe": "One-Click"})
    assert answer.status == 200
    assert stored("u-ar-1", "promo", "email") is False

    page.goto(url)
    expect(page.locator("h1")).to_have_text("لن تصلك رسائل البريد الإلكتروني «العروض التسويقية» بعد الآن")
    screenshot("unsubscribe-ar")
    page.get_by_role("button", name="تراجع").click()
    expect(page.locator("h1")).to_have_text("ستصلك رسائل البريد الإلكتروني «العروض التسويقية» مرة أخرى")
    assert stored("u-ar-1", "promo", "email") is True
    # The token reaches only this kind's unsubscribe pages: no way from here into the preference center.
    expect(page.locator(".p-more")).to_have_text("لتغيير إعدادات الإشعارات الأخرى، افتحها من التطبيق أو من موقعنا.")
    expect(page.locator("a[href*='/preferences/']")).to_have_count(0)
