"""The inapp channel: delivering writes one inbox message and announces it to the person's sockets on commit."""

import asyncio
import queue
import threading

import pytest
from channels.layers import get_channel_layer
from django.db import transaction

from backend.notifications.models import Notification, State
from backend.notifications.providers.base import OutboundMessage, provider_for_channel
from backend.notifications.tasks import deliver
from inbox import actions, events
from inbox.models import InboxMessage
from inbox.provider import safe_link, title_and_body

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]


@pytest.fixture
def layla_listens():
    """A channel in Layla's group on the Redis layer; returns ``receive(timeout) -> event | None``.

    It listens on an event loop of its own thread: a pub/sub subscription belongs to the loop
    that made it, and each ``async_to_sync`` call would bring a new one.
    """
    received: queue.Queue = queue.Queue()
    subscribed = threading.Event()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def listen():
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(events.group_name("u-ar-1"), channel)
        subscribed.set()
        while True:
            received.put(await layer.receive(channel))

    listening = asyncio.run_coroutine_threadsafe(listen(), loop)
    assert subscribed.wait(5)

    def receive(timeout: float = 2.0):
        try:
            return received.get(timeout=timeout)
        except queue.Empty:
            return None

    yield receive
    listening.cancel()
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)


def shipped_inapp(send, order: str, user_id: str = "u-ar-1", **params) -> str:
    body = {"user_id": user_id, "kind": "shipped", "channel": "inapp", "params": {"order": order, **params}}
    response = send(body, key=f"order-{order}-shipped-inapp")
    assert response.status_code == 202, response.json()
    return response.json()["id"]


def test_delivering_inapp_writes_the_message_and_marks_the_notification_sent(send):
    pk = shipped_inapp(send, "5012", link="https://shop.example.com/orders/5012")
    deliver(pk)

    message = InboxMessage.objects.get()
    assert (message.recipient.user_id, message.notification_id, message.kind, message.language) == (
        "u-ar-1",
        Notification.objects.get(pk=pk).pk,
        "shipped",
        "ar",
    )
    assert message.title == "تم شحن طلبك رقم 5012"
    assert message.body == "طلبك رقم 5012 في الطريق إليك."
    assert message.link == "https://shop.example.com/orders/5012"
    assert (message.read_at, message.archived_at) == (None, None)
    notification = Notification.objects.get(pk=pk)
    assert (notification.state, notification.provider, notification.provider_ref) == (
        State.SENT,
        "inapp",
        f"inbox:{message.pk}",
    )


def test_the_message_is_announced_to_the_persons_group_after_commit(send, layla_listens):
    first = shipped_inapp(send, "5012")
    second = shipped_inapp(send, "5013")
    deliver(first)
    deliver(second)
    one, two = InboxMessage.objects.order_by("id")

    layla = one.recipient_id
    assert layla_listens() == {
        "type": "inbox.new",
        "recipient": layla,
        "message": events.message_payload(one),
        "prev": 0,
        "unread": 1,
    }
    assert layla_listens() == {
        "type": "inbox.new", "recipient": layla, "message": events.message_payload(two), "prev": one.pk, "unread": 2
    }  # fmt: skip
    assert events.message_payload(one) == {
        "id": one.pk,
        "kind": "shipped",
        "title": "تم شحن طلبك رقم 5012",
        "body": "طلبك رقم 5012 في الطريق إليك.",
        "link": "",
        "language": "ar",
        "dir": "rtl",
        "created_at": one.created_at.isoformat().replace("+00:00", "Z"),
        "read_at": None,
        "archived_at": None,
    }


def test_nothing_is_announced_when_the_transaction_rolls_back(send, layla_listens):
    pk = shipped_inapp(send, "5012")
    new = actions.NewMessage(pk, "u-ar-1", "shipped", "ar", "title", "body")
    with pytest.raises(RuntimeError), transaction.atomic():
        actions.deliver(new)
        raise RuntimeError("the worker's transaction failed")
    assert InboxMessage.objects.count() == 0
    assert layla_listens(timeout=0.5) is None


def test_a_retried_delivery_writes_no_second_message_and_announces_nothing(send, layla_listens):
    pk = shipped_inapp(send, "5012")
    deliver(pk)
    assert layla_listens()["type"] == "inbox.new"
    provider = provider_for_channel("inapp")
    message = OutboundMessage(notification_id=pk, channel="inapp", to="u-ar-1", subject="s", text="t", language="ar")

    # The worker died after the row committed and before the notification was marked sent.
    assert provider.send(message) == provider.send(message) == f"inbox:{InboxMessage.objects.get().pk}"
    assert InboxMessage.objects.count() == 1
    assert layla_listens(timeout=0.5) is None


def test_a_notification_for_another_user_lands_in_their_inbox_only(send):
    deliver(shipped_inapp(send, "5012", user_id="u-en-1"))
    assert list(InboxMessage.objects.values_list("recipient__user_id", "title", "language", "body")) == [
        ("u-en-1", "Order 5012 has shipped", "en", "Your order 5012 is on its way.")
    ]


@pytest.mark.parametrize(
    ("link", "stored"),
    [
        ("https://shop.example.com/orders/5012", "https://shop.example.com/orders/5012"),
        ("http://shop.example.com/o?id=1", "http://shop.example.com/o?id=1"),
        ("/orders/5012", "/orders/5012"),
        ("javascript:alert(1)", ""),
        ("JavaScript:alert(1)", ""),
        ("data:text/html,<script>alert(1)</script>", ""),
        ("//evil.example.com/", ""),
        ("orders/5012", ""),
        ("https://", ""),
        (5012, ""),
        ("/" + "a" * 2048, ""),
        # Judged as a browser parses them (WHATWG URL): each of these opens evil.example.
        ("/\\evil.example/x", ""),
        ("\\\\evil.example", ""),
        ("\\/evil.example", ""),
        ("/\t/evil.example", ""),
        ("/\n/evil.example", ""),
        (" /\\evil.example", ""),
        ("\x01/\\evil.example", ""),
        ("/.//evil.example", ""),
        ("https://good@evil.example", ""),
        ("https://user:pass@shop.example.com/", ""),
        ("JaVaScRiPt:alert(1)", ""),
        ("java\nscript:alert(1)", ""),
        (" javascript:alert(1)", ""),
        ("\x00javascript:alert(1)", ""),
        ("data:,hello", ""),
        ("vbscript:msgbox(1)", ""),
        ("/\\[", ""),
        # Kept, in the form the browser will use.
        ("/%5Cevil.example", "/%5Cevil.example"),
        ("/orders\\5012", "/orders/5012"),
        ("  /orders/5012?tab=items#top\n", "/orders/5012?tab=items#top"),
        ("/orders/5012 details", "/orders/5012%20details"),
        ("HTTPS://Shop.Example.COM/orders/5012", "https://shop.example.com/orders/5012"),
        ("https://bücher.example/o", "https://xn--bcher-kva.example/o"),
    ],
)
def test_only_http_links_and_site_paths_are_kept(link, stored):
    assert safe_link(link) == stored


def test_without_a_subject_the_first_line_is_the_title_and_the_rest_the_body():
    assert title_and_body("", "Your order shipped.\n\nTrack it in your account.") == (
        "Your order shipped.",
        "Track it in your account.",
    )
    assert title_and_body("  Order shipped ", "Your order is on its way.\n") == (
        "Order shipped",
        "Your order is on its way.",
    )
    title, _ = title_and_body("x" * 300, "")
    assert (len(title), title[-1]) == (255, "…")
