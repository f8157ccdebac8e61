"""A support agent in Chromium: finds a caller by the number they read out, reads the trail, reveals, downloads."""

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from backend.notifications.models import Notification, StateChange
from backend.support.models import ContactReveal
from tests.support_setup import make_scene
from tests.test_campaign_report import pdf_text

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def scene(live_server):
    call_command("demo_data", stdout=io.StringIO())
    made = make_scene()
    # A delivery receipt as the receipts work records one (a state after sent): shown by its name.
    Notification.objects.filter(pk=made.sent.pk).update(state="delivered")
    StateChange.objects.create(
        notification=made.sent, from_state="sent", to_state="delivered", reason="twilio: delivered"
    )
    return made


def log_in_as_support(page, url: str) -> None:
    page.goto(f"{url}/support/")
    page.fill("#id_username", "support")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{url}/support/")


def test_support_finds_reads_reveals_and_downloads(live_server, page, screenshot, scene, tmp_path):
    log_in_as_support(page, live_server.url)

    page.fill("#q", "0501234567")
    page.click("form.search button[type=submit]")
    expect(page.locator("p.searched")).to_contain_text("Searched as phone number +966501234567")
    rows = page.locator("table.results tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.first).to_contain_text("+9665••••567")
    expect(page.locator("table.results")).not_to_contain_text("+966501234567")
    screenshot("support-search-phone")

    page.click("tr[data-state=suppressed] a >> nth=0")
    trail = page.locator("ol.trail")
    expect(trail).to_contain_text("Not sent: promo on email is off in the user's preferences since ")
    expect(trail).to_contain_text("(Asia/Riyadh), set by the user, in the preference center.")
    screenshot("support-trail-suppressed")

    page.go_back()
    page.click("tr[data-state=delivered] a >> nth=0")
    expect(page.locator("h1")).to_contain_text("Delivered")
    expect(trail).to_contain_text("Accepted by twilio for delivery.")
    expect(trail).to_contain_text("Delivered (twilio: delivered).")
    expect(page.locator("table.attempts")).to_contain_text("87 ms")
    expect(page.locator("blockquote.preview")).to_have_attribute("dir", "rtl")

    page.click("button:has-text('Reveal phone')")  # no reason yet: the browser keeps the form, nothing is shown
    expect(page.locator(".revealed")).to_have_count(0)
    assert ContactReveal.objects.count() == 0
    page.fill("input[name=reason][aria-label='Why you need the phone (recorded)']", "Ticket 4711: no SMS arrived")
    screenshot("support-notification-reveal-reason")
    page.click("button:has-text('Reveal phone')")
    expect(page.locator(".revealed[data-field=phone]")).to_have_text("+966501234567")
    expect(page.locator("button:has-text('Reveal phone')")).to_have_count(0)
    reveal = ContactReveal.objects.get()
    assert (reveal.username, reveal.recipient_user_id, reveal.field, reveal.notification_id, reveal.reason) == (
        "support", "u-ar-1", "phone", scene.sent.pk, "Ticket 4711: no SMS arrived",
    )  # fmt: skip
    screenshot("support-notification-delivered-revealed")

    with page.expect_download() as download:
        page.click("a.pdf")
    path = tmp_path / "history.pdf"
    download.value.save_as(path)
    text = pdf_text(path.read_bytes())
    assert "تم شحن طلبك رقم" in text
    assert "twilio" in text and "87 ms" in text and "SM5012abc" in text
    assert "Delivered (twilio: delivered)." in text
