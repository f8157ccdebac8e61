"""The campaign page in Chromium: it follows a run to 100 % without a reload; a cancel from it shows the ledger.

The test drives the fan-out and the delivery itself (``fanout.fan_out``, ``dispatch.deliver``
against the stub SMS provider), between checks of the page, so each step's figures are known.
"""

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from backend.notifications import retention
from backend.notifications.delivery import dispatch
from backend.notifications.models import Kind, Notification, Recipient, State
from campaigns import actions, fanout
from campaigns.models import Campaign
from e2e.test_template_editor import log_in
from tests.campaigns_setup import list_segment, submitted

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

AUDIENCE = 10


@pytest.fixture
def running(live_server, stub) -> Campaign:
    """An approved SMS campaign to 10 recipients, started by the scheduler, not yet fanned out."""
    call_command("demo_data", stdout=io.StringIO())
    Recipient.objects.bulk_create(
        Recipient(user_id=f"e2e-{n:02d}", phone=f"+1555020{n:04d}", language="en") for n in range(AUDIENCE)
    )
    marketer, approver = (User.objects.get(username=name) for name in ("marketer", "approver"))
    campaign = submitted(
        marketer, name="Order delays", kind=Kind.objects.get(name="shipped"), channel="sms", params={"order": "9"},
        segment=list_segment([f"e2e-{n:02d}" for n in range(AUDIENCE)], name="Delayed orders"),
    )  # fmt: skip
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    assert actions.start(campaign)
    return campaign


def deliver(campaign: Campaign, how_many: int) -> None:
    """Feed ``how_many`` queued rows (``queued_at`` set, as the feeder marks them) and hand them to the stub provider,
    as a worker does: a worker claims a campaign's row only once it was fed."""
    ids = list(Notification.objects.filter(campaign=campaign, state=State.QUEUED).values_list("pk", flat=True))
    Notification.objects.filter(pk__in=ids[:how_many]).update(queued_at=timezone.now())
    for pk in ids[:how_many]:
        dispatch.deliver(str(pk))


def test_the_page_follows_the_run_to_100_percent_without_a_reload(running, live_server, stub, page, screenshot):
    log_in(page, live_server, "marketer", f"/campaigns/{running.pk}/")
    page.evaluate("window.notReloaded = true")
    expect(page.locator("#campaign-state")).to_have_text("Running")
    expect(page.locator("#progress-percent")).to_have_text("0 %")

    fanout.fan_out(running.pk)
    deliver(running, 4)
    expect(page.locator("#progress-percent")).to_have_text("40 %")
    expect(page.locator('td[data-state="sent"]')).to_have_text("4")
    expect(page.locator('td[data-state="queued"]')).to_have_text("6")
    screenshot("campaign-progress-40")

    deliver(running, AUDIENCE)
    fanout.finish_done()
    expect(page.locator("#campaign-state")).to_have_text("Done")
    expect(page.locator("#progress-percent")).to_have_text("100 %")
    expect(page.locator('td[data-state="sent"]')).to_have_text(str(AUDIENCE))
    expect(page.locator("#campaign-progress")).to_have_attribute("data-live", "false")  # polling stopped
    assert page.evaluate("window.notReloaded") is True
    assert sorted(m["to"] for m in stub.state.messages) == [f"+1555020{n:04d}" for n in range(AUDIENCE)]
    screenshot("campaign-progress-100")

    # On a phone the page keeps its width; its wide tables scroll by themselves.
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth") == 390
    screenshot("campaign-progress-100-phone")


def test_a_cancel_from_the_page_shows_the_ledger(running, live_server, stub, page, screenshot):
    fanout.fan_out(running.pk)
    deliver(running, 3)
    log_in(page, live_server, "approver", f"/campaigns/{running.pk}/")
    expect(page.locator("#progress-percent")).to_have_text("30 %")

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-campaign")

    expect(page.locator("#campaign-state")).to_have_text("Cancelled")
    expect(page.locator(".tpl-message")).to_have_text("Cancelled: nothing more is handed to a provider.")
    expect(page.locator("#ledger-sent")).to_have_text("3")
    expect(page.locator("#ledger-cancelled")).to_have_text("7")
    expect(page.locator("#ledger-in-flight")).to_have_text("0")
    expect(page.locator("#ledger-csv")).to_have_attribute("href", f"/campaigns/{running.pk}/ledger.csv")
    expect(page.locator("#cancel-campaign")).to_have_count(0)
    expect(page.locator("#audit tbody tr").last).to_contain_text("sent 3, cancelled 7, in flight 0")
    assert len(stub.state.messages) == 3
    screenshot("campaign-cancelled-ledger")

    with page.expect_download() as download:
        page.click("#ledger-csv")
    lines = download.value.path().read_text(encoding="utf-8-sig").splitlines()  # after the BOM Excel needs
    assert lines[:2] == [
        '"user_id","address","state","reason","provider","sent_at"',
        f'"e2e-00","\'+1555••••000","sent","","twilio","{sent_at(running)}"',
    ]
    assert sum('"cancelled","campaign-cancelled"' in line for line in lines) == 7


def sent_at(campaign: Campaign) -> str:
    row = Notification.objects.get(campaign=campaign, recipient__user_id="e2e-00")
    return row.sent_at.isoformat().replace("+00:00", "Z")


def test_a_cancelled_campaign_whose_rows_retention_deleted_shows_its_frozen_ledger(
    running, live_server, page, screenshot
):
    fanout.fan_out(running.pk)
    deliver(running, 3)
    actions.cancel(running, User.objects.get(username="approver"))
    fanout.stop_cancelled()
    long_ago = timezone.now() - timedelta(days=100)
    Notification.objects.filter(campaign=running).update(updated_at=long_ago)
    Campaign.objects.filter(pk=running.pk).update(updated_at=long_ago)

    assert retention.purge(pause=0).deleted == AUDIENCE

    log_in(page, live_server, "marketer", f"/campaigns/{running.pk}/")
    expect(page.locator("#archived")).to_contain_text("Its notifications were deleted by retention after")
    expect(page.locator('td[data-state="sent"]')).to_have_text("3")
    expect(page.locator('td[data-state="cancelled"]')).to_have_text("7")
    expect(page.locator("#ledger-sent")).to_have_text("3")
    expect(page.locator("#ledger-cancelled")).to_have_text("7")
    for gone in ("#ledger-csv", "#resend-remainder", "#send-correction", "#pace"):
        expect(page.locator(gone)).to_have_count(0)
    screenshot("campaign-archived")
