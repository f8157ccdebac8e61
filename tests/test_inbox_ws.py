"""The inbox end to end: real daphne, real workers, the Redis channel layer and a real WebSocket client.

The done-when list of issue 6, one test each, plus the embedded default
(in-memory layer, SQLite queues), where only the socket's poll carries a
worker's message across processes.
"""

import signal
from datetime import timedelta

import pytest
import requests
import time_machine
from django.utils import timezone

from backend.notifications.models import Notification, State
from backend.notifications.tasks import deliver
from inbox import events, tokens
from inbox.models import InboxMessage
from inbox.testing import InboxSocket
from tests.processes import Processes, wait_until, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]


@pytest.fixture
def processes(smtp_sink):
    procs = Processes(worker_env(smtp_sink.port))
    yield procs
    procs.stop_all()


@pytest.fixture
def web(processes) -> str:
    """daphne as deploy/Procfile runs it, against the test database and Redis; its base URL."""
    return processes.start_web()


@pytest.fixture
def service(orders_service, web):
    """The orders service calling daphne over HTTP with its API key."""
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {orders_service[1]}"
    return session


def token_for(service, web: str, user_id: str) -> str:
    response = service.post(f"{web}/api/v1/users/{user_id}/inbox-token", timeout=10)
    assert response.status_code == 200
    return response.json()["token"]


def send_inapp(service, web: str, order: str, user_id: str = "u-ar-1") -> str:
    response = service.post(
        f"{web}/api/v1/notifications",
        json={"user_id": user_id, "kind": "shipped", "channel": "inapp", "params": {"order": order, "link": "/o/1"}},
        headers={"Idempotency-Key": f"order-{order}-shipped-{user_id}"},
        timeout=10,
    )
    assert response.status_code == 202, response.text
    return response.json()["id"]


def delivered(pk: str) -> InboxMessage:
    """Runs the worker's delivery of ``pk`` in this process (its events go out through Redis)."""
    deliver(pk)
    return InboxMessage.objects.get(notification_id=pk)


def test_a_notification_sent_through_the_api_arrives_on_the_socket(processes, web, service):
    processes.start("run_worker", "standard")
    with InboxSocket(web, token_for(service, web, "u-ar-1")) as socket:
        assert socket.recv() == {"type": "hello", "unread": 0, "last_id": 0, "messages": []}
        pk = send_inapp(service, web, "5012")

        new = socket.recv(timeout=15)
        message = InboxMessage.objects.get(notification_id=pk)
        assert new == {"type": "message.new", "message": events.message_payload(message)}
        assert (new["message"]["title"], new["message"]["body"], new["message"]["link"], new["message"]["dir"]) == (
            "تم شحن طلبك رقم 5012",
            "طلبك رقم 5012 في الطريق إليك.",
            "/o/1",
            "rtl",
        )
        assert socket.recv() == {"type": "unread", "count": 1}
    wait_until(lambda: Notification.objects.get(pk=pk).state == State.SENT, 10, "the notification marked sent")
    assert Notification.objects.get(pk=pk).provider_ref == f"inbox:{message.pk}"


def test_a_client_that_misses_5_messages_gets_exactly_those_5_when_it_syncs(web, service):
    token = token_for(service, web, "u-ar-1")
    with InboxSocket(web, token) as socket:
        socket.recv()
        seen = delivered(send_inapp(service, web, "1"))
        assert socket.recv()["message"]["id"] == seen.pk
        assert socket.recv() == {"type": "unread", "count": 1}

    missed = [delivered(send_inapp(service, web, str(order))) for order in range(2, 7)]

    with InboxSocket(web, token) as socket:
        hello = socket.recv()
        assert (hello["type"], hello["unread"], hello["last_id"]) == ("hello", 6, missed[-1].pk)
        socket.send({"type": "sync", "after": seen.pk})
        assert socket.recv() == {
            "type": "sync",
            "after": seen.pk,
            "messages": [events.message_payload(message) for message in missed],
            "more": False,
        }
        assert socket.quiet(0.5) == []  # nothing twice
        after = delivered(send_inapp(service, web, "7"))
        assert socket.recv() == {"type": "message.new", "message": events.message_payload(after)}
        assert socket.recv() == {"type": "unread", "count": 7}


def test_two_connections_of_one_user_see_each_others_read_marks(web, service):
    first, second = (delivered(send_inapp(service, web, order)) for order in ("1", "2"))
    with (
        InboxSocket(web, token_for(service, web, "u-ar-1")) as phone,
        InboxSocket(web, token_for(service, web, "u-ar-1")) as laptop,
    ):
        assert phone.recv()["unread"] == laptop.recv()["unread"] == 2

        phone.send({"type": "read", "id": first.pk})
        read_at = None
        for tab in (phone, laptop):
            event = tab.recv()
            read_at = read_at or event["read_at"]
            assert event == {"type": "message.read", "ids": [first.pk], "read_at": read_at}
            assert tab.recv() == {"type": "unread", "count": 1}

        laptop.send({"type": "archive", "id": second.pk})
        for tab in (phone, laptop):
            event = tab.recv()
            assert (event["type"], event["ids"]) == ("message.archived", [second.pk])
            assert tab.recv() == {"type": "unread", "count": 0}

    first.refresh_from_db()
    assert events.iso(first.read_at) == read_at


def test_another_users_token_sees_nothing(web, service):
    with (
        InboxSocket(web, token_for(service, web, "u-ar-1")) as layla,
        InboxSocket(web, token_for(service, web, "u-en-1")) as sam,
    ):
        layla.recv(), sam.recv()
        message = delivered(send_inapp(service, web, "5012"))
        assert layla.recv()["type"] == "message.new"
        assert layla.recv() == {"type": "unread", "count": 1}
        assert sam.quiet(1.0) == []

        sam.send({"type": "read", "id": message.pk})
        assert sam.recv() == {
            "type": "error",
            "code": "not-found",
            "message": f"No message {message.pk} in this inbox.",
            "id": message.pk,
        }
        sam.send({"type": "sync", "after": 0})
        assert sam.recv() == {"type": "sync", "after": 0, "messages": [], "more": False}
        assert layla.quiet(0.5) == []

    sams_token = token_for(service, web, "u-en-1")
    response = requests.get(
        f"{web}/api/v1/users/u-ar-1/inbox", headers={"Authorization": f"Bearer {sams_token}"}, timeout=10
    )
    assert response.status_code == 403
    assert InboxMessage.objects.get().read_at is None


def test_an_expired_token_is_refused(web):
    with time_machine.travel(timezone.now() - timedelta(minutes=16), tick=False):
        old = tokens.issue("u-ar-1").value
    socket = InboxSocket(web, old)
    assert socket.closed_with() == (
        4403,
        [{"type": "error", "code": "token-expired", "message": "The token has expired; get a new one."}],
    )
    assert InboxSocket(web, old[:-2] + "xx").closed_with() == (
        4401,
        [{"type": "error", "code": "token-invalid", "message": "The token is not valid."}],
    )


def test_the_embedded_default_reaches_the_socket_through_the_poll(smtp_sink, orders_service, tmp_path):
    # No Redis: the in-memory layer cannot carry the worker's event to daphne, SQLite holds the queues.
    embedded = Processes(
        worker_env(smtp_sink.port, REDIS_URL="", NOTIFY_DATA_DIR=str(tmp_path), NOTIFY_INBOX_POLL_INTERVAL="0.2")
    )
    try:
        web = embedded.start_web()
        embedded.start("run_worker", "standard")
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {orders_service[1]}"
        with InboxSocket(web, token_for(session, web, "u-ar-1")) as socket:
            assert socket.recv()["type"] == "hello"
            pk = send_inapp(session, web, "5012")
            new = socket.recv(timeout=20)
            assert new == {
                "type": "message.new",
                "message": events.message_payload(InboxMessage.objects.get(notification_id=pk)),
            }
            assert socket.recv(timeout=5) == {"type": "unread", "count": 1}
            # A read through daphne itself travels on the in-memory layer, at once.
            socket.send({"type": "read", "id": new["message"]["id"]})
            assert socket.recv()["type"] == "message.read"
            assert socket.recv() == {"type": "unread", "count": 0}
    finally:
        embedded.stop_all()


def test_an_idle_socket_outlives_redis_pys_5_second_read_timeout(web, service):
    # channels-redis's list-based layer waits in BZPOPMIN for 5 s, as long as redis-py 8's default
    # read timeout: it closed idle sockets with 1011 (django/channels_redis#422). Never again.
    with InboxSocket(web, token_for(service, web, "u-ar-1")) as socket:
        socket.recv()
        assert socket.quiet(7.0) == []
        message = delivered(send_inapp(service, web, "5012"))
        assert socket.recv() == {"type": "message.new", "message": events.message_payload(message)}


def test_a_burst_of_events_to_one_daphne_loses_none(smtp_sink, orders_service, monkeypatch):
    # channels-redis's list-based layer queues every socket of a daphne process in one sorted set
    # and its group_send drops past 100 waiting events; pub/sub has no such cap. Events only here:
    # the poll is off.
    processes = Processes(
        worker_env(
            smtp_sink.port,
            NOTIFY_INBOX_POLL_INTERVAL="3600",
            NOTIFY_RATE_LIMITS="marketing=3/h,10/d;transactional=1000/h,1000/d",
        )
    )
    try:
        web = processes.start_web()
        service = requests.Session()
        service.headers["Authorization"] = f"Bearer {orders_service[1]}"
        held = []
        monkeypatch.setattr(events, "publish", lambda user_id, event: held.append((user_id, event)))
        with InboxSocket(web, token_for(service, web, "u-ar-1")) as socket:
            socket.recv()
            ids = [delivered(send_inapp(service, web, str(order))).pk for order in range(150)]
            monkeypatch.undo()
            # daphne is frozen (a long GC pause, a busy loop) while all 150 events are queued.
            daphne = processes.running[0]
            daphne.send_signal(signal.SIGSTOP)
            try:
                for user_id, event in held:
                    events.publish(user_id, event)
            finally:
                daphne.send_signal(signal.SIGCONT)
            received = [socket.recv() for _ in range(300)]
        assert [m["message"]["id"] for m in received if m["type"] == "message.new"] == ids
        assert received[-1] == {"type": "unread", "count": 150}
    finally:
        processes.stop_all()
