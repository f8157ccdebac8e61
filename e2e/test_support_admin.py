"""A support agent finds a notification and its history in the admin, in Chromium."""

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from backend.notifications import actions

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def arabic_notification(live_server):
    call_command("demo_data", stdout=io.StringIO())
    request = actions.SendRequest(
        idempotency_key="order-5012-shipped", user_id="u-ar-1", kind="shipped", params={"order": "5012"},
        channel=None, priority=None, send_at=None,
    )  # fmt: skip
    return actions.accept(request, client=None).notification


def test_support_agent_sees_the_notification_and_its_history(live_server, page, screenshot, arabic_notification):
    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "support")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page.locator("#site-name")).to_be_visible()

    page.goto(f"{live_server.url}/admin/notifications/notification/?q=u-ar-1")
    row = page.locator("#result_list tbody tr")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("تم شحن طلبك رقم 5012")
    expect(row).to_contain_text("Queued")
    screenshot("support-notification-list")

    page.goto(f"{live_server.url}/admin/notifications/notification/{arabic_notification.pk}/change/")
    expect(page.locator("#state_changes-group")).to_contain_text("Queued")
    expect(page.locator("body")).to_contain_text("order-5012-shipped")
    screenshot("support-notification-detail")

    # Read-only: no "Save" on the notification, and the inbox messages are readable too (not a 403).
    expect(page.locator("input[name=_save]")).to_have_count(0)
    page.goto(f"{live_server.url}/admin/inbox/inboxmessage/")
    expect(page.locator("#content h1")).to_have_text("Select inbox message to view")


def test_home_page_links_the_api_and_the_admin(live_server, page, screenshot, arabic_notification):
    page.goto(f"{live_server.url}/")
    # Staff only: the login page first, then back to the home page.
    page.fill("#id_username", "support")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator("h1")).to_have_text("Notification platform")
    expect(page.locator("a[href='/api/v1/docs']").first).to_be_visible()
    expect(page.locator("table")).to_contain_text("u-ar-1")
    screenshot("home")
