"""The inbox in Chromium against real daphne, a real worker and the Redis channel layer.

A POST to the API shows up on the open page with no reload; marking it read
brings the badge down, in this tab and in the person's other tabs; a widget
that loses its server syncs what it missed when the server is back.
"""

import io
import json
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest
import requests
from django.core.management import call_command
from playwright.sync_api import expect

from backend.notifications import actions
from backend.notifications.models import ApiClient, Recipient
from backend.notifications.queues import HUEYS
from inbox import tokens
from inbox.models import InboxMessage
from tests.processes import ROOT, Processes, _answers, wait_until, worker_env

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


class Stack:
    def __init__(self):
        # Rate-limit counters and queues from earlier runs live in Redis, not in the test database.
        HUEYS["high"].storage.conn.flushdb()
        call_command("demo_data", stdout=io.StringIO())
        self.key = ApiClient.issue("orders")[1]
        # The worker never sends mail here (port 9 is "discard"); daphne serves /static/ as in the demo.
        self.processes = Processes(worker_env(9, SERVE_STATIC="1"))
        self.web = self.processes.start_web()
        self.processes.start("run_worker", "standard")

    def send(self, user_id: str, order: str) -> None:
        response = requests.post(
            f"{self.web}/api/v1/notifications",
            json={"user_id": user_id, "kind": "shipped", "channel": "inapp", "params": {"order": order}},
            headers={"Authorization": f"Bearer {self.key}", "Idempotency-Key": f"order-{order}-{user_id}"},
            timeout=10,
        )
        assert response.status_code == 202, response.text

    def send_while_web_is_down(self, user_id: str, order: str) -> None:
        """Accept in this process; the worker delivers through Redis while no daphne runs."""
        request = actions.SendRequest(
            idempotency_key=f"order-{order}-{user_id}", user_id=user_id, kind="shipped", params={"order": order},
            channel="inapp", priority=None, send_at=None,
        )  # fmt: skip
        actions.accept(request, client=None)

    def stop_web(self) -> None:
        """``kill -9`` daphne (a crash, or a deploy without draining)."""
        daphne = next(p for p in self.processes.running if "daphne" in p.args and p.poll() is None)
        self.processes.kill(daphne)

    def start_web_again(self) -> None:
        """daphne again on the same port, so the widget's socket URL still holds."""
        endpoint = f"tcp:port={urlsplit(self.web).port}:interface=127.0.0.1:backlog=256"
        argv = [sys.executable, "-m", "daphne", "-e", endpoint, "backend.asgi:application"]
        env = self.processes.env
        daphne = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.processes.running.append(daphne)
        wait_until(lambda: _answers(f"{self.web}/healthz"), 30, "daphne to answer again")


@pytest.fixture
def stack(transactional_db):
    stack = Stack()
    yield stack
    stack.processes.stop_all()


def test_the_inbox_page_shows_a_new_message_and_the_badge_live_in_arabic(page, screenshot, stack):
    page.goto(f"{stack.web}/inbox/{tokens.page_link('u-ar-1')}/")
    expect(page.locator("html")).to_have_attribute("dir", "rtl")
    expect(page.locator("h1")).to_have_text("صندوق الوارد")
    bell = page.locator(".inbox-bell")
    badge = bell.locator(".nb-badge")
    expect(bell).not_to_have_class("nb is-offline inbox-bell")  # the socket is open
    expect(bell).to_have_class("inbox-bell nb")
    expect(badge).to_have_attribute("data-count", "0")
    expect(page.locator(".inbox-empty")).to_have_text("لا توجد رسائل بعد.")
    screenshot("inbox-ar-empty")
    page.evaluate("window.__sameDocument = true")

    stack.send("u-ar-1", "5012")
    message = page.locator(".inbox-message")
    expect(message).to_have_count(1)
    expect(message.locator(".inbox-title")).to_have_text("تم شحن طلبك رقم 5012")
    expect(message).to_have_class("inbox-message is-unread")
    expect(badge).to_have_attribute("data-count", "1")
    expect(badge).to_have_text("1")
    assert page.evaluate("window.__sameDocument") is True  # no reload
    stack.send("u-ar-1", "5013")
    expect(badge).to_have_text("2")
    expect(message).to_have_count(2)
    expect(message.first.locator(".inbox-title")).to_have_text("تم شحن طلبك رقم 5013")
    screenshot("inbox-ar-new-messages")

    message.first.get_by_role("button", name="تعليم كمقروء").click()
    expect(badge).to_have_attribute("data-count", "1")
    expect(page.locator(".inbox-message.is-unread")).to_have_count(1)
    page.get_by_role("button", name="تعليم الكل كمقروء").click()
    expect(badge).to_have_attribute("data-count", "0")
    expect(page.locator(".inbox-message.is-unread")).to_have_count(0)
    assert page.evaluate("window.__sameDocument") is True
    screenshot("inbox-ar-read")


def test_the_widget_shows_a_read_from_another_tab(page, screenshot, stack):
    embed = f"{stack.web}/inbox/{tokens.page_link('u-en-1')}/embed"
    other_tab = page.context.new_page()
    other_tab.goto(f"{stack.web}/inbox/{tokens.page_link('u-en-1')}/")
    page.goto(embed)
    bell = page.locator("#bell")
    expect(bell).to_have_class("nb")
    expect(other_tab.locator(".inbox-bell")).to_have_class("inbox-bell nb")

    stack.send("u-en-1", "7001")
    badge = bell.locator(".nb-badge")
    expect(badge).to_have_text("1")
    bell.locator(".nb-bell").click()
    item = bell.locator(".nb-item")
    expect(item).to_have_count(1)
    expect(item.locator(".nb-title")).to_have_text("Order 7001 has shipped")
    expect(item).to_have_class("nb-item is-unread")
    screenshot("inbox-widget-en-open")

    other_tab.get_by_role("button", name="Mark as read").click()
    expect(badge).to_have_attribute("data-count", "0")
    expect(item).to_have_class("nb-item")
    screenshot("inbox-widget-en-read-elsewhere")
    other_tab.close()


def test_the_widget_reconnects_and_syncs_exactly_what_it_missed(page, screenshot, stack):
    frames: list[tuple[str, dict]] = []
    page.on(
        "websocket",
        lambda ws: (
            ws.on("framesent", lambda payload: frames.append(("sent", json.loads(payload)))),
            ws.on("framereceived", lambda payload: frames.append(("received", json.loads(payload)))),
        ),
    )
    page.goto(f"{stack.web}/inbox/{tokens.page_link('u-ar-1')}/embed")
    bell = page.locator("#bell")
    expect(bell).to_have_class("nb")
    stack.send("u-ar-1", "1")
    badge = bell.locator(".nb-badge")
    expect(badge).to_have_text("1")
    seen = InboxMessage.objects.get().pk

    stack.stop_web()
    expect(bell).to_have_class("nb is-offline")
    for order in ("2", "3", "4"):
        stack.send_while_web_is_down("u-ar-1", order)
    wait_until(lambda: InboxMessage.objects.count() == 4, 15, "the worker to deliver while daphne is down")
    frames.clear()
    stack.start_web_again()

    expect(badge).to_have_text("4", timeout=45_000)
    expect(bell).to_have_class("nb")
    missed = list(InboxMessage.objects.filter(pk__gt=seen).order_by("id").values_list("pk", flat=True))
    deadline = time.monotonic() + 10
    while not any(kind == "received" and f["type"] == "sync" for kind, f in frames):
        assert time.monotonic() < deadline, "no sync reply within 10 s"
        page.wait_for_timeout(50)  # Playwright delivers frame events only while it is called
    assert ("sent", {"type": "sync", "after": seen}) in frames
    reply = next(f for kind, f in frames if kind == "received" and f["type"] == "sync")
    assert ([m["id"] for m in reply["messages"]], reply["more"]) == (missed, False)
    bell.locator(".nb-bell").click()
    expect(bell.locator(".nb-item")).to_have_count(4)
    # Newest first, by id: the worker's threads may have delivered orders 2–4 in any order.
    titles = list(InboxMessage.objects.order_by("-id").values_list("title", flat=True))
    expect(bell.locator(".nb-item .nb-title")).to_have_text(titles)
    screenshot("inbox-widget-ar-after-reconnect")


def test_the_widget_makes_no_link_that_a_browser_resolves_off_site(page, stack):
    """Rows written before the server judged links as a browser does: the widget judges them again."""
    recipient = Recipient.objects.get(user_id="u-en-1")
    links = {
        "backslash": "/\\evil.example/x",
        "tab": "/\t/evil.example",
        "script": "javascript:alert(1)",
        "credentials": "https://good@evil.example/",
        "site path": "/orders/5012",
        "shop": "https://shop.example.com/orders/5012",
    }
    for title, link in links.items():
        InboxMessage.objects.create(recipient=recipient, kind="shipped", title=title, link=link)
    page.goto(f"{stack.web}/inbox/{tokens.page_link('u-en-1')}/embed")
    bell = page.locator("#bell")
    expect(bell).to_have_class("nb")
    bell.locator(".nb-bell").click()
    expect(bell.locator(".nb-item")).to_have_count(len(links))

    hrefs = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll("#bell .nb-title")].map((title) => {
            const anchor = title.querySelector("a");
            return [title.textContent, anchor && anchor.getAttribute("href")];
        }))"""
    )

    assert hrefs == {
        "backslash": None,
        "tab": None,
        "script": None,
        "credentials": None,
        "site path": f"{stack.web}/orders/5012",
        "shop": "https://shop.example.com/orders/5012",
    }
