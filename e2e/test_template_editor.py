"""The template editor in Chromium: live SMS pricing as one types, right-to-left Arabic, the look-alike fix."""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# 1 en dash makes this UCS-2: 89 UTF-16 units, 2 segments; with "-" it is 89 septets, 1 segment.
DASHED = "Your order {{ order }} has shipped – it arrives tomorrow. Track it in the app any time you like."


@pytest.fixture
def demo(live_server):
    call_command("demo_data", stdout=io.StringIO())
    return live_server


def log_in(page, server, username: str, then: str) -> None:
    """Through the admin login, which the editor's pages send anonymous visitors to."""
    page.goto(f"{server.url}{then}")
    expect(page).to_have_url(re.compile(r"/admin/login/\?next="))
    page.fill("#id_username", username)
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page).to_have_url(re.compile(re.escape(then.split("?")[0])))
    # The URL changes when the navigation commits, before htmx has bound the form's triggers on
    # DOMContentLoaded; text typed in between fires no preview and the page keeps its first pricing.
    page.wait_for_load_state("load")


def test_typing_prices_the_sms_as_one_types(demo, page, screenshot):
    log_in(page, demo, "editor", "/templates/edit/?kind=shipped&language=en&channel=sms")
    body = page.locator("#id_text_body")
    expect(body).to_have_value("Your order {{ order }} has shipped.")
    expect(page.locator("#sms-encoding")).to_have_text("GSM-7")
    expect(page.locator("#sms-segments")).to_have_text("1")
    expect(page.locator("#sms-price")).to_have_text("0.0079")  # English: priced for the US by default

    body.fill("Your order {{ order }} has shipped. " + "We will text you again when it is out for delivery. " * 3)
    expect(page.locator("#sms-segments")).to_have_text("2")
    expect(page.locator("#sms-price")).to_have_text("0.0158")
    expect(page.locator("#tpl-summary")).to_contain_text("2 segments")
    body.press("Control+End")
    body.press_sequentially(" Thanks!", delay=30)  # real keystrokes, through the debounce
    expect(page.locator("#sms-units-used")).to_have_text("40")  # 29 + 3 × 52 + 8 = 193 septets: 153 + 40
    expect(page.locator("#sms-units-left")).to_have_text("113")

    page.select_option("#id_country", "SA")
    expect(page.locator("#sms-price")).to_have_text("0.0900")
    page.fill("#id_audience", "250000")
    expect(page.locator("#sms-audience-price")).to_have_text("22,500.0000")
    expect(page.locator("#sms-worst-segments")).to_have_text("2")
    screenshot("template-editor-sms-typing")

    page.click("#tpl-save")
    expect(page.locator(".tpl-message")).to_contain_text("Saved shipped/en/sms v2 as a draft.")
    expect(page.locator(".tpl-meta")).to_contain_text("Editing from v2 Draft")
    screenshot("template-editor-saved-draft")


def test_an_arabic_template_is_laid_out_right_to_left(demo, page, screenshot):
    log_in(page, demo, "editor", "/templates/edit/?kind=shipped&language=ar&channel=sms")
    body = page.locator("#id_text_body")
    expect(body).to_have_attribute("dir", "rtl")
    expect(body).to_have_attribute("lang", "ar")
    expect(page.locator(".tpl-phone")).to_have_attribute("dir", "rtl")
    expect(page.locator("#sms-encoding")).to_have_text("UCS-2")
    expect(page.locator("#sms-price")).to_have_text("0.0450")  # Arabic: priced for Saudi Arabia by default
    # Right-to-left for real: the text starts at the right edge of the textarea.
    assert body.evaluate("el => getComputedStyle(el).direction") == "rtl"
    body.fill("تم شحن طلبك رقم {{ order }}. " * 4)  # 88 UTF-16 units
    expect(page.locator("#sms-segments")).to_have_text("2")
    screenshot("template-editor-arabic-sms")

    page.goto(f"{demo.url}/templates/edit/?kind=shipped&language=ar&channel=email")
    expect(page.locator("#id_subject")).to_have_attribute("dir", "rtl")
    expect(page.locator("#email-html")).to_have_attribute("sandbox", "")
    frame = page.frame_locator("#email-html")
    expect(frame.locator("html")).to_have_attribute("dir", "rtl")
    expect(frame.locator("h2")).to_have_text("طلبك في الطريق إليك")
    expect(page.locator("#email-text")).to_have_attribute("dir", "rtl")
    screenshot("template-editor-arabic-email")

    page.goto(f"{demo.url}/templates/edit/?kind=promo&language=ar&channel=push")
    expect(page.locator("#push-card")).to_have_attribute("dir", "rtl")
    expect(page.locator("#push-card")).to_contain_text("خصم 20٪")
    screenshot("template-editor-arabic-push")


def test_one_click_on_the_look_alike_brings_two_segments_back_to_one(demo, page, screenshot):
    log_in(page, demo, "editor", "/templates/edit/?kind=shipped&language=en&channel=sms")
    body = page.locator("#id_text_body")
    body.fill(DASHED)
    expect(page.locator("#sms-encoding")).to_have_text("UCS-2")
    expect(page.locator("#sms-segments")).to_have_text("2")
    mark = page.locator(".tpl-mirror button.tpl-mark--fix")
    expect(mark).to_have_count(1)
    expect(mark).to_have_text("–")
    screenshot("template-editor-lookalike-before")

    mark.click()
    expect(page.locator("#sms-segments")).to_have_text("1")
    expect(page.locator("#sms-encoding")).to_have_text("GSM-7")
    expect(page.locator("#id_text_body")).to_have_value(DASHED.replace("–", "-"))
    expect(page.locator(".tpl-mirror")).to_have_count(0)
    screenshot("template-editor-lookalike-after")

    # The fixed text is what the form now holds: typing on re-prices it, still GSM-7.
    page.locator("#id_text_body").press("Control+End")
    page.locator("#id_text_body").press_sequentially(" “Thanks”", delay=30)
    expect(page.locator(".tpl-mirror button.tpl-mark--fix")).to_have_count(2)
    page.click(".tpl-fix-all")
    expect(page.locator("#id_text_body")).to_have_value(DASHED.replace("–", "-") + ' "Thanks"')
    expect(page.locator("#sms-segments")).to_have_text("1")


def test_an_approver_approves_the_editors_draft(demo, page, screenshot):
    log_in(page, demo, "editor", "/templates/edit/?kind=otp&language=en&channel=sms")
    page.locator("#id_text_body").fill("Your login code: {{ code }}")
    page.click("#tpl-save")
    expect(page.locator(".tpl-message")).to_contain_text("Saved otp/en/sms v2 as a draft.")
    draft_url = page.url
    page.context.clear_cookies()

    log_in(page, demo, "approver", "/templates/")
    page.goto(draft_url)
    expect(page.locator("#id_text_body")).to_have_attribute("readonly", "")
    page.click("text=Approve v2")
    expect(page.locator(".tpl-message")).to_contain_text("Approved otp/en/sms v2.")
    page.goto(f"{demo.url}/templates/?kind=otp")
    expect(page.locator("table.tpl-list")).to_contain_text("v2")
    screenshot("template-list-after-approval")
