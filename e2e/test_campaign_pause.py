"""Pause and resume in Chromium: the page says paused and its counts stop while a worker tries; resumed, it goes on.

As e2e/test_campaign_progress.py, the test plays the scheduler and the worker itself (``fanout.feed``,
``dispatch.deliver`` against the stub SMS provider) between checks of the page, so each figure is known.
"""

import pytest
from playwright.sync_api import expect

from backend.notifications.delivery import dispatch
from backend.notifications.models import Notification, State
from backend.notifications.queues import HUEYS
from campaigns import fanout
from campaigns.models import Campaign
from e2e.test_campaign_progress import AUDIENCE, deliver, running  # noqa: F401 (the fixture)
from e2e.test_template_editor import log_in

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_pause_stops_the_counts_and_resume_continues_the_run(running, live_server, stub, page, screenshot):  # noqa: F811
    fanout.fan_out(running.pk)
    deliver(running, 3)
    log_in(page, live_server, "marketer", f"/campaigns/{running.pk}/")
    expect(page.locator("#progress-percent")).to_have_text("30 %")
    HUEYS["standard"].flush()
    assert fanout.feed(limit=4) == 4  # four tasks wait in the queue when the marketer pauses
    fed = [str(pk) for pk in Notification.objects.filter(campaign=running, queued_at__isnull=False, state=State.QUEUED)
           .values_list("pk", flat=True)]  # fmt: skip

    page.click("#pause-campaign")

    expect(page.locator("#campaign-state")).to_have_text("Paused")
    paused = "Paused: nothing more is handed to a provider until you resume it."
    expect(page.locator(".tpl-message")).to_have_text(paused)
    expect(page.locator('#why-waiting li[data-reason="paused"]')).to_contain_text("Paused by marketer at ")
    expect(page.locator("#expected-end")).to_have_text("none while paused")
    expect(page.locator("#pause-campaign")).to_have_count(0)
    for pk in fed:  # the worker pops the four tasks: it claims none of them
        dispatch.deliver(pk)
    fanout.tick()  # the scheduler feeds nothing
    page.wait_for_timeout(2500)  # a poll or more later, the counts have not moved
    expect(page.locator('td[data-state="sent"]')).to_have_text("3")
    expect(page.locator('td[data-state="queued"]')).to_have_text("7")
    expect(page.locator("#progress-percent")).to_have_text("30 %")
    assert len(stub.state.messages) == 3
    screenshot("campaign-paused")

    page.click("#resume-campaign")

    expect(page.locator("#campaign-state")).to_have_text("Running")
    expect(page.locator(".tpl-message")).to_have_text("Resumed: it continues with the recipients not yet handed over.")
    expect(page.locator("#why-waiting")).to_have_count(0)
    deliver(running, 4)
    expect(page.locator("#progress-percent")).to_have_text("70 %")
    deliver(running, AUDIENCE)
    fanout.finish_done()
    expect(page.locator("#campaign-state")).to_have_text("Done")
    expect(page.locator("#progress-percent")).to_have_text("100 %")
    expect(page.locator("#audit tbody tr", has_text="taken back from the queue")).to_contain_text(
        "Paused — sent 3, 4 taken back from the queue"
    )
    expect(page.locator("#audit tbody tr", has_text="Resumed — after")).to_have_count(1)
    assert sorted(m["to"] for m in stub.state.messages) == [f"+1555020{n:04d}" for n in range(AUDIENCE)]
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.DONE
    screenshot("campaign-resumed-done")
