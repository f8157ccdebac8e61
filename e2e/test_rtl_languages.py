"""Pashto and Central Kurdish in Chromium: the editor, the preference center and the inbox read right to left.

Issue 13: direction comes from CLDR (``locales.text_direction``), not from a list of four; these two
were left to right before. Screenshots land in test-results/ (rtl-<language>-<page>.png).
"""

import io
import re

import pytest
from django.core.management import call_command
from django.urls import reverse
from playwright.sync_api import expect

from backend.notifications import links
from backend.notifications.models import Recipient
from inbox import tokens

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LANGUAGES = ["ps", "ckb"]


@pytest.fixture
def demo(live_server):
    call_command("demo_data", stdout=io.StringIO())
    for language in LANGUAGES:
        Recipient.objects.create(user_id=f"u-{language}-1", email=f"{language}@example.com", language=language,
                                 time_zone="Asia/Kabul")  # fmt: skip
    return live_server


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_editor_is_right_to_left(demo, page, screenshot, language):
    then = f"/templates/edit/?kind=shipped&language={language}&channel=sms"
    page.goto(f"{demo.url}{then}")
    page.fill("#id_username", "editor")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page).to_have_url(re.compile(re.escape("/templates/edit/")))
    page.wait_for_load_state("load")
    body = page.locator("#id_text_body")
    expect(body).to_have_attribute("dir", "rtl")
    expect(body).to_have_attribute("lang", language)
    body.fill("سفارش {{ order }} واستول شوه.")
    expect(page.locator("#sms-bubble")).to_contain_text("5012")
    expect(page.locator("figure.tpl-phone")).to_have_attribute("dir", "rtl")
    expect(page.locator("#sms-no-isolates")).to_contain_text("no direction marks are added to an SMS")
    assert page.locator("#sms-bubble").evaluate("e => getComputedStyle(e).direction") == "rtl"
    screenshot(f"rtl-{language}-editor")


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_preference_center_is_right_to_left(demo, page, screenshot, language):
    page.goto(demo.url + reverse("frontend:preferences", args=[links.preference_token(f"u-{language}-1")]))
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("html")).to_have_attribute("lang", language)
    assert page.locator("body").evaluate("e => getComputedStyle(e).direction") == "rtl"
    screenshot(f"rtl-{language}-preferences")


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_inbox_page_is_right_to_left(demo, page, screenshot, language):
    page.goto(f"{demo.url}/inbox/{tokens.page_link(f'u-{language}-1')}/")
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("html")).to_have_attribute("lang", language)
    assert page.locator("body").evaluate("e => getComputedStyle(e).direction") == "rtl"
    expect(page.locator(".inbox-bell.nb")).to_have_attribute("dir", "rtl")  # the widget, once mounted
    screenshot(f"rtl-{language}-inbox")
    # Where the page is not in the widget's language, the browser's CLDR data decides (Intl.Locale).
    direction = page.evaluate(
        """lang => { document.documentElement.lang = "en"; document.documentElement.dir = "ltr";
                     const root = document.createElement("div"); document.body.append(root);
                     try { NotifyInbox.mount(root, null, {lang: lang, panel: false}); } catch (e) {}
                     return root.dir; }""",  # the direction is set before the client is used
        language,
    )
    assert direction == "rtl"
