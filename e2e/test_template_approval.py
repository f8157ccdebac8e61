"""Template approval in Chromium: the waiting list and its count, the diff, request changes, a test to oneself."""

import email
import email.policy
import io
import re
import time
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from playwright.sync_api import expect

from backend.notifications import actions
from backend.notifications.models import Kind
from e2e.conftest import SCREENSHOTS
from e2e.test_template_editor import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

COMMENT = "Please keep “has shipped”: customers search their mail for it. شكراً"


@pytest.fixture
def demo(live_server):
    call_command("demo_data", stdout=io.StringIO())
    return live_server


def mails(folder: Path, count: int, timeout: float = 10.0) -> list[email.message.EmailMessage]:
    """The sink's mails once there are ``count`` of them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(folder.glob("*.eml"))
        if len(found) >= count:
            return [email.message_from_bytes(p.read_bytes(), policy=email.policy.default) for p in found]
        time.sleep(0.05)
    raise AssertionError(f"expected {count} mails in {folder}")


def test_an_approver_requests_changes_that_the_writer_sees(demo, page, browser, screenshot):
    editor = User.objects.get(username="editor")
    shipped = Kind.objects.get(name="shipped")
    draft = actions.save_template_draft(shipped, "en", "sms", editor, text_body="Your order {{ order }} is packed.")
    actions.save_template_draft(shipped, "ar", "sms", editor, text_body="طلبك رقم {{ order }} جاهز للشحن.")

    log_in(page, demo, "approver", "/templates/awaiting/")
    expect(page.locator("#nav-awaiting .nav-count")).to_have_text("2")
    expect(page.locator("#rv-waiting-count")).to_have_text("2")
    expect(page.locator(".rv-waiting tbody tr")).to_have_count(2)
    screenshot("template-approval-waiting-list")

    page.locator(".rv-waiting tbody tr", has_text="shipped · ar · sms").get_by_role("link").click()
    new_line = page.locator(".rv-new").first
    expect(new_line).to_have_attribute("dir", "rtl")
    assert new_line.evaluate("el => getComputedStyle(el).direction") == "rtl"
    screenshot("template-approval-diff-arabic")

    page.goto(f"{demo.url}/templates/{draft.pk}/review/")
    expect(page.locator(".rv-old del").first).to_have_text("has shipped")
    expect(page.locator(".rv-new ins").first).to_have_text("is packed")
    screenshot("template-approval-diff")
    page.fill("#rv-comment", COMMENT)
    page.click("#rv-request-changes")
    expect(page).to_have_url(re.compile(r"/templates/awaiting/$"))
    expect(page.locator(".tpl-message")).to_contain_text("Requested changes to shipped/en/sms v2")
    expect(page.locator("#nav-awaiting .nav-count")).to_have_text("1")

    writer = browser.new_context().new_page()
    log_in(writer, demo, "editor", f"/templates/{draft.pk}/")
    expect(writer.locator("#tpl-review-note")).to_contain_text("Changes requested by approver")
    expect(writer.locator("#tpl-review-note .rv-comment")).to_have_text(COMMENT)
    expect(writer.locator("#tpl-events")).to_contain_text("changes requested")
    writer.screenshot(path=str(SCREENSHOTS / "template-approval-writer-sees-comment.png"), full_page=True)


def test_an_editor_sends_a_test_to_themselves_and_finds_it_in_the_mail_sink(demo, page, mail_sink, screenshot):
    log_in(page, demo, "editor", "/templates/edit/?kind=shipped&language=en&channel=email")
    expect(page.locator(".rv-test")).to_contain_text("to you only (e•••@example.com), marked [TEST]")
    page.fill("input[name=param-order]", "E2E-42")
    page.click("#rv-send-test")
    expect(page.locator(".tpl-message")).to_contain_text("Sent shipped/en/email v1 to you (e•••@example.com)")
    expect(page.locator("#tpl-events")).to_contain_text("test sent to self")
    screenshot("template-test-sent-to-self")

    [mail] = mails(mail_sink, 1)
    assert mail["To"] == "editor@example.com"
    assert mail["Subject"] == "[TEST] Your order E2E-42 has shipped"
    assert mail["X-Notify-Test"] == "1"
