"""A campaign from end to end in Chromium: an Arabic SMS campaign to an uploaded list, priced live, submitted, not
approvable by its author, approved by a second person, run on the stub providers to 100 %, and its PDF report.

The audience: three Arabic speakers in Saudi Arabia (Asia/Riyadh, UTC+03:00) and two in the
Emirates (Asia/Dubai, UTC+04:00). With a short name the Arabic text is one UCS-2 segment:
3 × 0.0450 (SA) + 2 × 0.0380 (AE) = 0.2110 USD; a 30-letter name makes it two: 0.4220.
"""

import io
import re

import pytest
from django.core.management import call_command
from playwright.sync_api import expect

from backend.notifications.models import Category, Kind, Notification, Recipient, State, TemplateVersion
from campaigns import fanout
from campaigns.models import Campaign
from e2e.test_campaign_progress import deliver
from e2e.test_template_editor import log_in
from tests.test_campaign_report import pdf_text

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SHOPPERS = {
    "gulf-1": ("+966501110001", "Asia/Riyadh"),
    "gulf-2": ("+966501110002", "Asia/Riyadh"),
    "gulf-3": ("+966501110003", "Asia/Riyadh"),
    "gulf-4": ("+971501110004", "Asia/Dubai"),
    "gulf-5": ("+971501110005", "Asia/Dubai"),
}
CSV = ("user_id\n" + "\n".join(SHOPPERS) + "\n").encode()
ARABIC = "عرض خاص يا {{ name }}! خصم على كل شيء حتى يوم الأحد."


@pytest.fixture
def demo(live_server):
    call_command("demo_data", stdout=io.StringIO())
    kind = Kind.objects.create(
        name="flash", category=Category.MARKETING, channels=["sms"], opt_out_allowed=True, default_language="ar",
        params={"name": {"example": "سارة", "max_length": 40}},
    )  # fmt: skip
    TemplateVersion.objects.create(
        kind=kind, language="ar", channel="sms", text_body=ARABIC, status=TemplateVersion.Status.APPROVED
    )
    for user_id, (phone, zone) in SHOPPERS.items():
        Recipient.objects.create(user_id=user_id, language="ar", phone=phone, time_zone=zone)
    return live_server


def upload_list(page) -> None:
    page.fill("input[name=name]", "Gulf shoppers")
    page.set_input_files("input[type=file]", {"name": "gulf.csv", "mimeType": "text/csv", "buffer": CSV})
    page.click("text=Read the file")
    expect(page.locator("#known")).to_have_text("5")
    page.click("#save-segment")
    expect(page.locator(".tpl-message")).to_contain_text("Saved the list segment 'Gulf shoppers' with 5 users.")


def test_a_marketer_composes_an_arabic_sms_campaign_an_approver_approves_it_and_it_runs(demo, stub, page, screenshot):
    page.set_viewport_size({"width": 1440, "height": 900})
    log_in(page, demo, "marketer", "/campaigns/segments/upload/new")
    upload_list(page)

    page.goto(f"{demo.url}/campaigns/")
    page.click("#new-campaign")
    page.wait_for_load_state("load")
    # The name last: the pre-flight follows the kind, channel and segment before the form is complete.
    page.select_option("#compose-kind", "flash")
    shoppers = page.locator("#compose-segment option", has_text="Gulf shoppers").get_attribute("value")
    page.select_option("#compose-segment", shoppers)
    name = page.locator("input[name=param_name]")
    expect(name).to_be_visible()  # the kind's params arrived with its pickers
    name.fill("سارة")
    expect(page.locator("#pf-audience")).to_have_text("5")
    expect(page.locator("#pf-total")).to_have_text("0.2110")
    expect(page.locator("#pf-waves .pf-wave-size")).to_have_text(["5"])
    preview = page.locator("#preview-ar .cmp-message")
    expect(preview).to_have_attribute("dir", "rtl")
    expect(preview).to_contain_text("عرض خاص يا سارة!")
    screenshot("campaign-composer-one-segment")

    name.fill("سارة بنت عبد الرحمن بن محمد الأحمدي")  # 34 letters: the message needs a second segment
    expect(page.locator("#pf-total")).to_have_text("0.4220")
    expect(page.locator("#pf-languages tbody td").nth(2)).to_have_text("2")
    page.check("input[name=schedule_mode][value=local_time]")
    page.fill("input[name=local_time]", "09:00")
    sizes = page.locator("#pf-waves .pf-wave-size")
    expect(sizes).to_have_count(2)  # Riyadh's 09:00 and Dubai's 09:00 are two instants
    assert sorted(sizes.all_inner_texts()) == ["2", "3"]
    page.select_option("#compose-correction", "none")
    page.fill("textarea[name=correction_none_reason]", "A wrong price is corrected by a new campaign.")
    screenshot("campaign-composer-local-time-waves")

    page.fill("input[name=name]", "Weekend flash sale")
    page.click("#compose-submit")
    expect(page.locator(".tpl-message")).to_have_text(
        "Submitted 'Weekend flash sale': a second person must approve it."
    )
    campaign = Campaign.objects.get(name="Weekend flash sale")
    assert (campaign.state, campaign.preflight["sms"]["total"]) == ("submitted", "0.4220")

    page.click("text=Review page")
    expect(page.locator("#review-hash")).to_have_text(campaign.content_hash)
    expect(page.locator("#review-approve")).to_have_count(0)  # the author never gets the button
    expect(page.locator("#review-no-decision")).to_contain_text("marketer may not approve campaigns.")
    screenshot("campaign-review-by-its-author")

    page.context.clear_cookies()
    log_in(page, demo, "approver", f"/campaigns/{campaign.pk}/review")
    expect(page.locator("#preview-ar .cmp-message")).to_have_attribute("dir", "rtl")
    expect(page.locator("#pf-total")).to_have_text("0.4220")
    screenshot("campaign-review-by-the-approver")
    page.click("#review-approve")
    expect(page.locator("#review-state")).to_have_text("Approved")
    expect(page.locator(".tpl-message")).to_have_text("Approved 'Weekend flash sale'.")
    expect(page.locator("#review-decided")).to_contain_text("Nothing waits for a decision: the campaign is approved")
    campaign.refresh_from_db()
    assert campaign.state == "approved"
    assert re.fullmatch(r"[0-9a-f]{64}", campaign.approvals.get().content_hash)

    # The scheduler starts it and makes the two waves; each is released at its instant and the workers send it.
    fanout.tick()
    assert fanout.fan_out(campaign.pk).complete
    rows = Notification.objects.filter(campaign=campaign)
    assert sorted(rows.values_list("state", "reason")) == [(State.SCHEDULED, "campaign-wave")] * 5
    page.goto(f"{demo.url}/campaigns/{campaign.pk}/")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#progress-percent")).to_have_text("0 %")
    last_wave = max(rows.values_list("send_at", flat=True))
    assert fanout.release_due(now=last_wave) == 5
    deliver(campaign, 5)
    fanout.finish_done()
    expect(page.locator("#campaign-state")).to_have_text("Done")
    expect(page.locator("#progress-percent")).to_have_text("100 %")
    expect(page.locator('td[data-state="sent"]')).to_have_text("5")
    assert page.evaluate("window.notReloaded") is True
    assert sorted(message["to"] for message in stub.state.messages) == sorted(phone for phone, _ in SHOPPERS.values())
    screenshot("campaign-run-to-100-percent")

    with page.expect_download() as download:
        page.click("#report-link")
    text = pdf_text(download.value.path().read_bytes())
    # The Arabic body, in logical order. Not "الأحد": poppler gives a lam-alef ligature's letters back swapped.
    assert "عرض خاص يا سارة بنت عبد الرحمن بن محمد" in text and "خصم على كل شيء حتى يوم" in text
    assert "approver" in text and campaign.content_hash in text
