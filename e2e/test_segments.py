"""The segment pages in Chromium: a marketer uploads a CSV, reads its report, saves it; a filter counts live."""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from e2e.test_template_editor import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CSV = "\ufeffuser_id\nu-ar-1\nu-fa-1\n\nu-ar-1\nnobody-7\n".encode()


@pytest.fixture
def demo(live_server):
    call_command("demo_data", stdout=io.StringIO())
    return live_server


def test_a_marketer_uploads_a_csv_reads_the_report_and_saves_the_segment(demo, page, screenshot):
    log_in(page, demo, "marketer", "/campaigns/segments/")
    page.click("text=Upload a CSV")
    page.fill("input[name=name]", "Gulf VIPs")
    page.set_input_files("input[type=file]", {"name": "vips.csv", "mimeType": "text/csv", "buffer": CSV})
    page.click("text=Read the file")
    expect(page.locator("#rows-read")).to_have_text("4")
    expect(page.locator("#duplicates")).to_have_text("1")
    expect(page.locator("#blank-lines")).to_have_text("1")
    expect(page.locator("#known")).to_have_text("2")
    expect(page.locator("#unknown")).to_have_text("1")
    page.click("#unknown-ids summary")
    expect(page.locator("#unknown-ids li")).to_have_text(["nobody-7"])
    screenshot("segments-upload-report")

    page.click("#save-segment")
    expect(page).to_have_url(re.compile(r"/campaigns/segments/$"))
    expect(page.locator(".tpl-message")).to_have_text("Saved the list segment 'Gulf VIPs' with 2 users.")
    row = page.locator("#segments tbody tr", has_text="Gulf VIPs")
    expect(row.locator("td").nth(2)).to_have_text("2")
    expect(row.locator("td").nth(3)).to_have_text("marketer")
    screenshot("segments-list-after-upload")


def test_a_filter_counts_as_the_marketer_types_and_marks_the_bad_row(demo, page, screenshot):
    log_in(page, demo, "marketer", "/campaigns/segments/new")
    page.select_option("select[name=field] >> nth=0", "language")
    page.select_option("select[name=op] >> nth=0", "in")
    page.fill("input[name=value] >> nth=0", "ar, fa")
    expect(page.locator("#seg-count")).to_have_text("2 recipients match now.")
    expect(page.locator("#seg-sample tbody tr")).to_have_count(2)
    expect(page.locator("#seg-sample tbody tr").first).to_contain_text("+9665••••567")

    page.select_option("select[name=field] >> nth=1", "country")
    page.fill("input[name=value] >> nth=1", "XX")
    expect(page.locator("#seg-row-error-1")).to_have_text(
        "Unknown country 'XX'; use an ISO 3166 code such as SA, IR or US."
    )
    page.fill("input[name=value] >> nth=1", "SA")
    expect(page.locator("#seg-count")).to_have_text("1 recipient matches now.")
    expect(page.locator("#seg-row-error-1")).to_have_text("")
    screenshot("segments-filter-live")
    page.fill("input[name=name]", "Saudi Arabic and Persian speakers")
    page.click("text=Save segment")
    row = page.locator("#segments tbody tr", has_text="Saudi Arabic and Persian speakers")
    expect(row.locator("td").nth(2)).to_have_text("1")


def test_an_arabic_speaking_marketer_gets_the_english_page_with_arabic_ids_in_their_direction(demo, page, screenshot):
    from backend.notifications.actions import upsert_recipient

    upsert_recipient("مستخدم-٧", {"language": "ar", "phone": "+966551112222", "email": "ward@example.com"})
    page.set_extra_http_headers({"Accept-Language": "ar"})
    log_in(page, demo, "marketer", "/campaigns/segments/new")
    expect(page.locator("html")).to_have_attribute("dir", "ltr")  # English lines (frontend/staff_language.py)
    page.select_option("select[name=field] >> nth=0", "language")
    page.fill("input[name=value] >> nth=0", "ar")
    expect(page.locator("#seg-count")).to_have_text("2 recipients match now.")
    cell = page.locator("#seg-sample tbody tr").nth(1).locator("td").first
    expect(cell).to_have_text("مستخدم-٧")
    expect(page.locator("#seg-sample tbody tr").nth(1)).to_contain_text("w•••@example.com")
    expect(cell).to_have_attribute("dir", "auto")
    screenshot("segments-filter-arabic-ids")
