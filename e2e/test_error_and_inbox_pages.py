"""In Chromium: the styled 403 in Arabic for a support agent opening the editor; the inbox page on a 390 px phone.

Screenshots land in test-results/ (``error-403-ar``, ``inbox-390-ar``, ``inbox-390-ar-archived``).
"""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from backend.notifications import actions
from backend.notifications.delivery.dispatch import deliver
from inbox import actions as inbox_actions
from inbox import tokens
from inbox.models import InboxMessage

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def demo(live_server):
    call_command("demo_data", stdout=io.StringIO())
    return live_server


# A browser set to Arabic: Chromium sends Accept-Language: ar.
@pytest.mark.browser_context_args(locale="ar")
def test_a_support_agent_opening_the_editor_gets_the_styled_403_in_arabic(demo, page, screenshot):
    page.goto(f"{demo.url}/templates/edit/")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next="))
    page.fill("#id_username", "support")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page.locator("html")).to_have_attribute("lang", "ar")
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("h1")).to_have_text("ليس لديك إذن بفتح هذه الصفحة")
    expect(page.locator(".p-error-code")).to_have_text("خطأ 403")
    home = page.get_by_role("link", name="الانتقال إلى الصفحة الرئيسية")
    expect(home).to_be_visible()
    # The product's look: the brand bar and the card, laid out right to left (the heading hugs the right edge).
    expect(page.locator(".p-brand")).to_have_text("Notify")
    card = page.locator(".p-card").bounding_box()
    assert card["width"] > 300
    screenshot("error-403-ar")
    home.click()
    expect(page).to_have_url(f"{demo.url}/")


def inbox_messages(count: int) -> list[InboxMessage]:
    """``count`` shipped messages in Layla's inbox (u-ar-1, Arabic), delivered as a worker would."""
    messages = []
    for order in range(5010, 5010 + count):
        request = actions.SendRequest(
            idempotency_key=f"order-{order}", user_id="u-ar-1", kind="shipped", params={"order": str(order)},
            channel="inapp", priority=None, send_at=None,
        )  # fmt: skip
        accepted = actions.accept(request, client=None)
        deliver(str(accepted.notification.pk))
        messages.append(InboxMessage.objects.get(notification_id=accepted.notification.pk))
    return messages


def test_the_inbox_page_at_390_px_shows_messages_readable(demo, page, screenshot):
    first, _second, _third = inbox_messages(3)
    inbox_actions.archive("u-ar-1", first.pk)
    page.set_viewport_size(PHONE)
    page.goto(f"{demo.url}/inbox/{tokens.page_link('u-ar-1')}/")
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    rows = page.locator(".inbox-message")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".inbox-title")).to_have_text("تم شحن طلبك رقم 5012")

    # Readable: nothing wider than the phone, and the text has (nearly) the card's whole width.
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    for index in range(2):
        card = rows.nth(index).bounding_box()
        text = rows.nth(index).locator(".inbox-message-text").bounding_box()
        assert text["width"] >= 0.85 * card["width"], (text, card)
        assert card["x"] >= 0 and card["x"] + card["width"] <= PHONE["width"]

    # The time as the widget shows it, in Arabic ("الآن" / "قبل …"), the local date and time as its tooltip.
    time = rows.first.locator("time.inbox-time")
    expect(time).not_to_have_text(re.compile(r"\d{4}"))
    expect(time).to_have_attribute("title", re.compile(r"\d{4}, \d{2}:\d{2}$"))
    screenshot("inbox-390-ar")

    page.get_by_role("link", name="المؤرشفة").click()
    expect(page).to_have_url(re.compile(r"\?show=archived$"))
    expect(rows).to_have_count(1)
    expect(page.get_by_role("link", name="المؤرشفة")).to_have_attribute("aria-current", "page")
    screenshot("inbox-390-ar-archived")
    page.get_by_role("link", name="غير المقروءة").click()
    expect(rows).to_have_count(2)
    rows.first.get_by_role("button", name="تعليم كمقروء").click()
    expect(page.locator(".inbox-message.is-unread")).to_have_count(1)


def test_layla_stops_all_marketing_and_the_offer_switches_follow(demo, page, screenshot):
    from django.urls import reverse

    from backend.notifications import links
    from backend.notifications.models import Preference

    page.set_viewport_size(PHONE)
    page.goto(demo.url + reverse("frontend:preferences", args=[links.preference_token("u-ar-1")]))
    expect(page.locator(".p-contact")).to_contain_text("l•••@example.com")
    expect(page.locator(".p-contact")).to_contain_text("+9665••••567")
    stop = page.get_by_role("switch", name="إيقاف كل الرسائل التسويقية")
    offer = page.get_by_role("switch", name="العروض التسويقية البريد الإلكتروني", exact=True)
    expect(stop).not_to_be_checked()
    expect(offer).to_be_checked()
    stop.click()
    expect(page.locator("#p-marketing [role=status]")).to_have_text("تم الحفظ")
    expect(offer).not_to_be_checked()  # swapped in out of band, without a reload
    assert set(Preference.objects.filter(recipient__user_id="u-ar-1").values_list("kind__name", "enabled")) == {
        ("promo", False)
    }
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    screenshot("preferences-390-ar-marketing-stopped")
    offer.click()  # one offer back on: the switch follows, off
    expect(stop).not_to_be_checked()
