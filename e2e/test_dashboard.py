"""A support agent opens the dashboard in Chromium and sees its plots drawn, refreshed live, also right-to-left."""

import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.utils import timezone
from playwright.sync_api import expect

from backend.notifications import actions
from backend.notifications.models import Attempt, DeadLetter, Notification, StateChange

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CHARTS = ("sent", "latency", "failures", "dead_letters", "queue", "cost", "delivered")
# Pixels of a canvas that are not transparent: Chart.js draws on a transparent canvas, so a chart
# with axes, lines or bars has thousands, an empty canvas none.
PAINTED = """id => {
  const canvas = document.getElementById("chart-" + id);
  const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
  let painted = 0;
  for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted++;
  return painted;
}"""


def accepted(key: str, user: str = "u-en-1", kind: str = "shipped", **fields) -> Notification:
    """Accepted through the action, then moved in time and state (with its state change, as the engine writes)."""
    params = {"code": "123456"} if kind == "otp" else {"order": key}
    request = actions.SendRequest(
        idempotency_key=key, user_id=user, kind=kind, params=params, channel=None, priority=None, send_at=None
    )
    notification = actions.accept(request, client=None).notification
    Notification.objects.filter(pk=notification.pk).update(**fields)
    if "state" in fields:
        StateChange.objects.create(notification=notification, from_state="queued", to_state=fields["state"])
    return Notification.objects.get(pk=notification.pk)


@pytest.fixture
def traffic(live_server):
    """A few minutes of traffic: mail and SMS sent, an SMS failing over, a dead letter, one still queued."""
    call_command("demo_data", stdout=io.StringIO())
    now = timezone.now()
    for minutes, key in ((1, "a"), (3, "b"), (3, "c")):
        sent = now - timedelta(minutes=minutes)
        n = accepted(key, created_at=sent - timedelta(milliseconds=150), sent_at=sent, state="sent", provider="smtp")
        Attempt.objects.create(notification=n, number=1, provider="smtp", started_at=sent, result="sent")
    sent = now - timedelta(minutes=2)
    sms = accepted(
        "otp-1", user="u-ar-1", kind="otp", channel="sms", provider="twilio", state="delivered",
        created_at=sent - timedelta(milliseconds=900), sent_at=sent,
    )  # fmt: skip
    for number, result in ((1, "transient"), (2, "sent")):
        Attempt.objects.create(
            notification=sms, number=number, provider="twilio", started_at=now - timedelta(minutes=2), result=result,
            cost=Decimal("0.0450"), currency="USD", sms_encoding="UCS-2", sms_segments=1,
        )  # fmt: skip
    DeadLetter.objects.create(notification=accepted("dead"), provider="smtp", attempts=5)
    accepted("waiting")  # queued now


def log_in_as_support(page, url: str) -> None:
    page.goto(url)
    page.fill("#id_username", "support")
    page.fill("#id_password", "demo")
    page.click("input[type=submit]")


def test_support_sees_every_plot_drawn_and_refreshed(live_server, page, screenshot, traffic):
    page.clock.install()
    log_in_as_support(page, f"{live_server.url}/support/dashboard/")
    expect(page.locator("h1")).to_have_text("Delivery dashboard")
    expect(page.locator("#dashboard")).to_have_attribute("data-drawn", re.compile(".+"))

    for chart in CHARTS:
        assert page.evaluate(PAINTED, chart) > 1000, f"chart {chart} has nothing drawn"
    sent = page.evaluate("() => dashboardCharts.sent.data.datasets.map(d => [d.label, d.data.reduce((a, b) => a + b)])")
    assert sent == [["\u2068email\u2069", 3], ["\u2068sms\u2069", 1]]
    expect(page.locator("#dash-dead")).to_have_text("1")
    expect(page.locator("#dash-breakers")).to_contain_text("twilio: closed")
    screenshot("support-dashboard")

    # Live: one more mail sent; the next poll (10 s for the hour) draws it without a reload.
    drawn = page.locator("#dashboard").get_attribute("data-drawn")
    accepted("d", sent_at=timezone.now(), state="sent", provider="smtp")
    page.clock.run_for(10_500)
    expect(page.locator("#dashboard")).not_to_have_attribute("data-drawn", drawn)
    sent = page.evaluate("() => dashboardCharts.sent.data.datasets.map(d => d.data.reduce((a, b) => a + b))")
    assert sent == [4, 1]


def test_an_arabic_browser_gets_the_english_dashboard_left_to_right(live_server, page, screenshot, traffic):
    # Its lines are English: laid out right to left they read "closed :webpush" (frontend/staff_language.py).
    page.context.add_cookies([{"name": "django_language", "value": "ar", "url": live_server.url}])
    log_in_as_support(page, f"{live_server.url}/support/dashboard/?window=day")
    expect(page.locator("#dashboard")).to_have_attribute("data-drawn", re.compile(".+"))

    expect(page.locator("html")).to_have_attribute("dir", "ltr")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    legend = page.evaluate(
        "() => { const l = dashboardCharts.failures.options.plugins.legend; return [l.rtl, l.textDirection]; }"
    )
    assert legend == [False, "ltr"]
    labels = page.evaluate("() => dashboardCharts.failures.data.datasets.map(d => d.label)")
    assert labels == ["\u2068smtp\u2069", "\u2068twilio\u2069"]  # each name isolated all the same
    expect(page.locator("#dash-breakers")).to_contain_text("twilio: closed")
    assert page.evaluate(PAINTED, "failures") > 1000
    screenshot("support-dashboard-arabic-browser")
