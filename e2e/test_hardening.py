"""Pages that matter for hardening, in Chromium under the Content-Security-Policy: the API docs and the login lockout.

The ``no_csp_violations`` fixture (conftest.py) fails a test whose page the policy blocked.
"""

import io

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def staff(live_server):
    call_command("demo_data", stdout=io.StringIO())


def test_the_api_docs_render_without_inline_script(live_server, page, screenshot, staff):
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.locator(".swagger-ui .title")).to_contain_text("Notify API")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    screenshot("api-docs")


def sign_in(page, live_server, password: str) -> None:
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "editor")
    page.fill("#id_password", password)
    page.click("input[type=submit]")


def test_five_wrong_passwords_show_the_lockout_page(live_server, page, screenshot, staff):
    for _ in range(4):
        sign_in(page, live_server, "wrong")
        expect(page.locator(".errornote")).to_be_visible()
    sign_in(page, live_server, "wrong")
    expect(page.locator("h1")).to_have_text("Too many failed sign-ins")
    page.goto(f"{live_server.url}/admin/login/")
    page.fill("#id_username", "editor")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")
    expect(page.locator("h1")).to_have_text("Too many failed sign-ins")
    screenshot("login-locked")
