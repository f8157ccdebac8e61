"""The inbox consumer alone (channels' WebsocketCommunicator, in-memory layer): greeting, refusals,
commands, and how a socket gets every message exactly once when events are lost or cross."""

import asyncio
import contextlib

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.db.models import Max
from django.test.utils import CaptureQueriesContext

from backend.notifications import actions as notification_actions
from backend.notifications import erasure
from backend.notifications.delivery.dispatch import deliver
from backend.notifications.models import Recipient
from inbox import actions, consumers, events, tokens
from inbox.models import InboxMessage
from inbox.poller import newest_ids, poller
from inbox.routing import websocket_urlpatterns

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

APP = URLRouter(websocket_urlpatterns)


@pytest.fixture(autouse=True)
def in_memory_layer(settings):
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.INBOX = {**settings.INBOX, "POLL_INTERVAL": 60.0}


@pytest.fixture
def shipped(send):
    """Delivers "order <n> shipped" to u-ar-1 through the worker's code; returns the message."""

    def put(order: int, user_id: str = "u-ar-1") -> InboxMessage:
        body = {"user_id": user_id, "kind": "shipped", "channel": "inapp", "params": {"order": str(order)}}
        pk = send(body, key=f"order-{order}-{user_id}").json()["id"]
        deliver(pk)
        return InboxMessage.objects.get(notification_id=pk)

    return database_sync_to_async(put)


@pytest.fixture
def silent(monkeypatch):
    """Events get lost: nothing published reaches the layer."""
    monkeypatch.setattr(events, "publish", lambda user_id, event: None)


async def connect(user_id: str = "u-ar-1", token: str | None = None) -> WebsocketCommunicator:
    token = tokens.issue(user_id).value if token is None else token
    communicator = WebsocketCommunicator(APP, f"/ws/inbox/?token={token}")
    connected, _ = await communicator.connect(timeout=5)
    assert connected
    return communicator


def payload(message: InboxMessage) -> dict:
    message.refresh_from_db()
    return events.message_payload(message)


def test_the_socket_greets_with_the_unread_count_and_the_newest_page(shipped):
    async def scenario():
        first, second, third = [await shipped(n) for n in (1, 2, 3)]
        await database_sync_to_async(actions.mark_read)("u-ar-1", first.pk)
        await database_sync_to_async(actions.archive)("u-ar-1", third.pk)
        socket = await connect()
        hello = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return hello, first, second, third

    hello, first, second, third = async_to_sync(scenario)()
    assert hello == {
        "type": "hello",
        "unread": 1,
        "last_id": third.pk,  # archived messages count for the cursor, not for the page
        "messages": [payload(first), payload(second)],
    }


@pytest.mark.parametrize(
    ("token", "code", "error"),
    [
        ("", 4401, {"type": "error", "code": "token-invalid", "message": "The token is not valid."}),
        ("garbage", 4401, {"type": "error", "code": "token-invalid", "message": "The token is not valid."}),
        (
            tokens.page_link("u-ar-1"),
            4401,
            {"type": "error", "code": "token-invalid", "message": "The token is not valid."},
        ),
        (
            tokens.issue("u-nobody").value,
            4401,
            {"type": "error", "code": "token-invalid", "message": "The token's user no longer exists."},
        ),
    ],
)
def test_a_bad_token_is_refused_with_4401_and_a_reason(token, code, error):
    async def scenario():
        socket = await connect(token=token)
        return await socket.receive_json_from(timeout=5), await socket.receive_output(timeout=5)

    assert async_to_sync(scenario)() == (error, {"type": "websocket.close", "code": code})


def test_an_expired_token_is_refused_with_4403(settings):
    settings.INBOX = {**settings.INBOX, "TOKEN_TTL": 0}  # every token is already too old

    async def scenario():
        socket = await connect(token=tokens.issue("u-ar-1").value)
        return await socket.receive_json_from(timeout=5), await socket.receive_output(timeout=5)

    assert async_to_sync(scenario)() == (
        {"type": "error", "code": "token-expired", "message": "The token has expired; get a new one."},
        {"type": "websocket.close", "code": 4403},
    )


def test_a_lost_event_is_delivered_by_the_poll_to_that_person_only(settings, shipped, silent):
    settings.INBOX = {**settings.INBOX, "POLL_INTERVAL": 0.1}

    async def scenario():
        layla, sam = await connect(), await connect("u-en-1")
        await layla.receive_json_from(timeout=5)
        await sam.receive_json_from(timeout=5)
        message = await shipped(1)
        received = [await layla.receive_json_from(timeout=5) for _ in range(2)]
        sam_heard_nothing = await sam.receive_nothing(timeout=0.5)
        await layla.disconnect()
        await sam.disconnect()
        return message, received, sam_heard_nothing

    message, received, sam_heard_nothing = async_to_sync(scenario)()
    assert received == [{"type": "message.new", "message": payload(message)}, {"type": "unread", "count": 1}]
    assert sam_heard_nothing is True


def test_one_query_finds_the_newest_message_of_everyone_with_a_socket(shipped, django_assert_num_queries):
    put = async_to_sync(shipped)
    put(1), put(2)
    sams = put(3, "u-en-1")
    laylas = InboxMessage.objects.filter(recipient__user_id="u-ar-1").latest("id")
    people = dict(Recipient.objects.values_list("user_id", "pk"))
    with django_assert_num_queries(1):
        newest = newest_ids([people["u-ar-1"], people["u-en-1"], people["u-fa-1"]])
    assert newest == {people["u-ar-1"]: laylas.pk, people["u-en-1"]: sams.pk}


def test_the_poll_probes_each_persons_newest_message_instead_of_reading_their_whole_inbox():
    """``MAX(id) … GROUP BY recipient_id`` read every message of every person with a socket at each poll (47 ms for
    1,000 sockets of 100 messages each, growing with their inboxes): one index probe each now (8 ms)."""
    people = list(Recipient.objects.values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {InboxMessage._meta.db_table} (recipient_id, kind, language, title, body, link, created_at)"
            " SELECT r, 'shipped', 'en', 'Shipped', '', '', now()"
            " FROM generate_series(1, 2000) g, unnest(%s::bigint[]) r",
            [people],
        )
        cursor.execute(f"ANALYZE {InboxMessage._meta.db_table}")
    with CaptureQueriesContext(connection) as captured:
        newest = newest_ids(people)
    assert newest == dict(
        InboxMessage.objects.values("recipient_id").annotate(m=Max("id")).values_list("recipient_id", "m")
    )

    (poll,) = [q["sql"] for q in captured.captured_queries]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {poll}")
        (plan,) = cursor.fetchone()
    read = sum(node["Actual Rows"] * node["Actual Loops"] for node in _nodes(plan[0]["Plan"])
               if node.get("Relation Name") == InboxMessage._meta.db_table)  # fmt: skip
    assert read == len(people), plan  # before: 2,000 a person


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def test_events_that_cross_are_put_back_in_order_and_a_late_one_is_dropped(shipped, silent):
    async def scenario():
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        first, second = await shipped(1), await shipped(2)
        group = events.group_name("u-ar-1")
        # The second message's event arrives first: its prev (the first message) was never sent.
        await get_channel_layer().group_send(group, events.new_event(second, prev=first.pk, unread=2))
        received = [await socket.receive_json_from(timeout=5) for _ in range(3)]
        await get_channel_layer().group_send(group, events.new_event(first, prev=0, unread=1))
        late = await socket.receive_nothing(timeout=0.3)
        await socket.disconnect()
        return first, second, received, late

    first, second, received, late = async_to_sync(scenario)()
    assert received == [
        {"type": "message.new", "message": payload(first)},
        {"type": "message.new", "message": payload(second)},
        {"type": "unread", "count": 2},
    ]
    assert late is True


def test_sync_returns_every_later_message_in_pages_of_100(silent):
    def accept_and_store(order: int) -> int:
        request = notification_actions.SendRequest(
            idempotency_key=f"bulk-{order}", user_id="u-ar-1", kind="shipped", params={"order": str(order)},
            channel="inapp", priority=None, send_at=None,
        )  # fmt: skip
        pk = str(notification_actions.accept(request, client=None).notification.pk)
        new = actions.NewMessage(pk, "u-ar-1", "shipped", "ar", f"order {order}", "")
        return actions.deliver(new)[0].pk

    async def scenario():
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        ids = [await database_sync_to_async(accept_and_store)(n) for n in range(1, 106)]
        await socket.send_json_to({"type": "sync", "after": ids[1]})
        first = await socket.receive_json_from(timeout=5)
        await socket.send_json_to({"type": "sync", "after": first["messages"][-1]["id"]})
        second = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return ids, first, second

    ids, first, second = async_to_sync(scenario)()
    assert (first["type"], first["after"], first["more"]) == ("sync", ids[1], True)
    assert [m["id"] for m in first["messages"]] == ids[2:102]
    assert (second["after"], second["more"]) == (ids[101], False)
    assert [m["id"] for m in second["messages"]] == ids[102:]


def test_a_read_reaches_every_socket_of_the_person_and_no_one_else(shipped):
    async def scenario():
        message = await shipped(1)
        tab_a, tab_b, sam = await connect(), await connect(), await connect("u-en-1")
        for socket in (tab_a, tab_b, sam):
            await socket.receive_json_from(timeout=5)
        await tab_a.send_json_to({"type": "read", "id": message.pk})
        seen = [[await tab.receive_json_from(timeout=5) for _ in range(2)] for tab in (tab_a, tab_b)]
        sam_heard_nothing = await sam.receive_nothing(timeout=0.3)
        for socket in (tab_a, tab_b, sam):
            await socket.disconnect()
        return message, seen, sam_heard_nothing

    message, seen, sam_heard_nothing = async_to_sync(scenario)()
    read_at = payload(message)["read_at"]
    assert read_at is not None
    expected = [{"type": "message.read", "ids": [message.pk], "read_at": read_at}, {"type": "unread", "count": 0}]
    assert seen == [expected, expected]
    assert sam_heard_nothing is True


def test_read_all_and_archive_over_the_socket(shipped):
    async def scenario():
        first, second = await shipped(1), await shipped(2)
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        await socket.send_json_to({"type": "read_all", "through": first.pk})
        after_read_all = [await socket.receive_json_from(timeout=5) for _ in range(2)]
        await socket.send_json_to({"type": "archive", "id": second.pk})
        after_archive = [await socket.receive_json_from(timeout=5) for _ in range(2)]
        await socket.disconnect()
        return first, second, after_read_all, after_archive

    first, second, after_read_all, after_archive = async_to_sync(scenario)()
    assert after_read_all == [
        {"type": "message.read", "ids": [first.pk], "read_at": payload(first)["read_at"]},
        {"type": "unread", "count": 1},
    ]
    assert after_archive == [
        {"type": "message.archived", "ids": [second.pk], "archived_at": payload(second)["archived_at"]},
        {"type": "unread", "count": 0},
    ]


@pytest.mark.parametrize(
    ("sent", "answer"),
    [
        ("not json", {"type": "error", "code": "bad-json", "message": "Send one JSON object per message."}),
        ('["sync"]', {"type": "error", "code": "unknown-type", "message": "Unknown command type None."}),
        ('{"type": "dance"}', {"type": "error", "code": "unknown-type", "message": "Unknown command type 'dance'."}),
        (
            '{"type": "sync", "after": -1}',
            {
                "type": "error",
                "code": "invalid",
                "message": "sync needs 'after': the last message id seen (0 for none).",
            },
        ),
        (
            '{"type": "read", "id": true}',
            {"type": "error", "code": "invalid", "message": "read needs 'id': a message id."},
        ),
        (
            '{"type": "archive", "id": 999999}',
            {"type": "error", "code": "not-found", "message": "No message 999999 in this inbox.", "id": 999999},
        ),
        (
            '{"type": "read_all", "through": "all"}',
            {"type": "error", "code": "invalid", "message": "read_all 'through' must be a message id when given."},
        ),
        ('{"type": "ping"}', {"type": "pong"}),
    ],
)
def test_each_command_is_answered_or_refused_by_name(sent, answer):
    async def scenario():
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        await socket.send_to(text_data=sent)
        reply = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return reply

    assert async_to_sync(scenario)() == answer


BAD_JSON = {"type": "error", "code": "bad-json", "message": "Send one JSON object per message."}
TOO_LARGE = {"type": "error", "code": "too-large", "message": "A command has at most 4096 characters."}


@pytest.mark.parametrize(
    ("sent", "answer"),
    [
        ("[" * 4000, BAD_JSON),  # json.loads raised RecursionError: the socket closed 1011
        ("[" * 500 + "]" * 500, BAD_JSON),  # parses, but no command nests like this
        ('{"type": "ping", "x": ' + "[" * 9 + "]" * 9 + "}", BAD_JSON),
        ('{"type": "ping", "x": ' + "[" * 7 + "]" * 7 + "}", {"type": "pong"}),  # 8 levels: the most there is
        ('{"type": "ping", "pad": "' + "x" * 5000 + '"}', TOO_LARGE),
        ("[" * 100_000, TOO_LARGE),
        ("\x00", BAD_JSON),
    ],
)
def test_an_odd_frame_is_refused_by_name_and_the_socket_stays_open(sent, answer):
    async def scenario():
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        await socket.send_to(text_data=sent)
        reply = await socket.receive_json_from(timeout=5)
        await socket.send_to(text_data='{"type": "ping"}')
        after = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return reply, after

    assert async_to_sync(scenario)() == (answer, {"type": "pong"})


# --- bounds: sockets per person, commands per socket, a socket daphne kills ---------------------------------------


def test_one_socket_past_the_persons_limit_is_refused_with_4429_and_others_are_not(settings):
    settings.INBOX = {**settings.INBOX, "MAX_SOCKETS_PER_USER": 2}

    async def scenario():
        first, second = await connect(), await connect()
        await first.receive_json_from(timeout=5)
        await second.receive_json_from(timeout=5)
        third = await connect()
        refused = await third.receive_json_from(timeout=5), await third.receive_output(timeout=5)
        someone_else = await connect("u-fa-1")
        other = (await someone_else.receive_json_from(timeout=5))["type"]
        await first.disconnect()
        again = await connect()
        after_one_closed = (await again.receive_json_from(timeout=5))["type"]
        for socket in (second, someone_else, again):
            await socket.disconnect()
        return refused, other, after_one_closed, dict(poller().per_recipient), dict(poller().sockets)

    refused, other, after_one_closed, per_recipient, sockets = async_to_sync(scenario)()
    message = "This person has 2 inbox sockets open here already; close one, then reconnect."
    assert refused == (
        {"type": "error", "code": "too-many-sockets", "message": message},
        {"type": "websocket.close", "code": 4429},
    )
    assert (other, after_one_closed) == ("hello", "hello")
    assert (per_recipient, sockets) == ({}, {})


def test_a_socket_past_its_command_budget_is_told_and_closed_with_4429(settings):
    settings.INBOX = {**settings.INBOX, "COMMAND_BURST": 3, "COMMANDS_PER_SECOND": 0.1}

    async def scenario():
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        replies = []
        for _ in range(3):
            await socket.send_to(text_data='{"type": "ping"}')
            replies.append(await socket.receive_json_from(timeout=5))
        await socket.send_to(text_data='{"type": "sync", "after": 0}')
        refused = await socket.receive_json_from(timeout=5), await socket.receive_output(timeout=5)
        await socket.send_to(text_data='{"type": "ping"}')  # already closing: not answered
        late = await socket.receive_nothing(timeout=0.3)
        await socket.disconnect()
        return replies, refused, late

    replies, refused, late = async_to_sync(scenario)()
    assert replies == [{"type": "pong"}] * 3
    message = "More than 3 commands at once or 0.1 a second; reconnect after a pause."
    assert refused == (
        {"type": "error", "code": "too-many-commands", "message": message},
        {"type": "websocket.close", "code": 4429},
    )
    assert late is True


def test_a_persons_sockets_share_one_budget_that_a_reconnect_does_not_refill(settings):
    """Ten sockets reconnecting in turn each got a fresh burst: 315 commands a second from one token."""
    settings.INBOX = {**settings.INBOX, "COMMAND_BURST": 3, "COMMANDS_PER_SECOND": 0.1}

    async def scenario():
        first = await connect()
        await first.receive_json_from(timeout=5)
        for _ in range(2):
            await first.send_to(text_data='{"type": "ping"}')
            await first.receive_json_from(timeout=5)
        await first.disconnect()
        again = await connect()  # the same person, a new socket: one command left, not three
        await again.receive_json_from(timeout=5)
        await again.send_to(text_data='{"type": "ping"}')
        answered = await again.receive_json_from(timeout=5)
        await again.send_to(text_data='{"type": "ping"}')
        refused = await again.receive_json_from(timeout=5), await again.receive_output(timeout=5)
        await again.disconnect()
        other = await connect("u-fa-1")  # someone else's budget is their own
        await other.receive_json_from(timeout=5)
        await other.send_to(text_data='{"type": "ping"}')
        theirs = await other.receive_json_from(timeout=5)
        await other.disconnect()
        return answered, refused, theirs

    answered, refused, theirs = async_to_sync(scenario)()
    assert answered == theirs == {"type": "pong"}
    assert (refused[0]["code"], refused[1]) == ("too-many-commands", {"type": "websocket.close", "code": 4429})


@pytest.mark.parametrize(
    ("takes", "expected"),
    [
        pytest.param([0, 0, 0], [True, True, False], id="a-burst-of-2-then-empty"),
        pytest.param([0, 0, 0, 0.2, 0.2], [True, True, False, True, False], id="0.2-s-at-5-a-second-is-one-more"),
        pytest.param([0, 0, 0.1, 0.3], [True, True, False, True], id="half-a-token-is-none-1.5-is-one"),
        pytest.param([0, 0, 100, 100, 100], [True, True, True, True, False], id="refilled-to-the-burst-not-past-it"),
    ],
)
def test_the_command_bucket_refills_at_its_rate_up_to_its_burst(monkeypatch, takes, expected):
    """Burst 2, 5 a second; ``takes`` are the instants (seconds) of each command."""
    clock = iter([0.0, *takes])  # the first reading is the bucket's creation
    monkeypatch.setattr(consumers.time, "monotonic", lambda: next(clock))
    bucket = consumers.CommandBucket(burst=2, rate=5.0)
    assert [bucket.take() for _ in takes] == expected


def test_a_socket_daphne_kills_without_a_disconnect_is_no_longer_watched():
    """daphne cancels an instance that outlives its close timeout (a flooded socket); disconnect never runs."""

    async def scenario():
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        watched = len(poller().sockets)
        socket.future.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await socket.future
        return watched, dict(poller().sockets), dict(poller().per_recipient)

    assert async_to_sync(scenario)() == (1, {}, {})


GONE = (
    {"type": "error", "code": "token-invalid", "message": "The token's user no longer exists."},
    {"type": "websocket.close", "code": consumers.CLOSE_INVALID_TOKEN},
)


def test_an_erasure_closes_the_persons_open_sockets(shipped):
    async def scenario():
        await shipped(1)
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        await database_sync_to_async(erasure.erase)("u-ar-1", by="the test")
        return await socket.receive_json_from(timeout=5), await socket.receive_output(timeout=5)

    assert async_to_sync(scenario)() == GONE


def test_a_socket_of_an_erased_record_never_touches_a_new_record_of_the_same_id(shipped, silent):
    """Events lost (silent), so the socket outlives the erasure: its commands and the new record's events close it."""

    async def scenario():
        await shipped(1)
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        await database_sync_to_async(erasure.erase)("u-ar-1", by="the test")
        await database_sync_to_async(Recipient.objects.create)(user_id="u-ar-1", email="new@example.com")
        newcomer = await shipped(2)
        await socket.send_json_to({"type": "read", "id": newcomer.pk})
        return newcomer, (await socket.receive_json_from(timeout=5), await socket.receive_output(timeout=5))

    newcomer, answer = async_to_sync(scenario)()
    assert answer == GONE
    newcomer.refresh_from_db()
    assert newcomer.read_at is None


def test_an_event_of_another_record_of_the_user_id_closes_the_socket(shipped):
    async def scenario():
        message = await shipped(1)
        socket = await connect()
        await socket.receive_json_from(timeout=5)
        event = {**events.new_event(message, prev=0, unread=1), "recipient": message.recipient_id + 1000}
        await get_channel_layer().group_send(events.group_name("u-ar-1"), event)
        return await socket.receive_json_from(timeout=5), await socket.receive_output(timeout=5)

    assert async_to_sync(scenario)() == GONE
