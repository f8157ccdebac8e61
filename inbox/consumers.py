"""The inbox WebSocket, ``/ws/inbox/?token=…`` (protocol: README "In-app inbox").

One consumer per socket. It joins the person's group, greets with the unread
count and the newest page, then forwards what happens: ``message.new``,
``message.read``, ``message.archived`` and ``unread``. Each socket keeps a
cursor — the highest message id it has sent — so a message reaches it once
even when an event, the poll and a ``sync`` all carry it:

* an event whose ``prev`` (the person's previous message) is above the cursor
  reveals a gap (a lost event, or two events that crossed): the socket fills
  it from the database in id order instead of trusting the event;
* the process's poller (``inbox.poller``) nudges a socket whose cursor is
  behind the database, and it catches up with the same code as ``sync``.

Handlers run one at a time per consumer (Channels dispatches sequentially),
so the cursor needs no lock; the poller's nudge is a layer message too.
"""

import json
import logging
import time
from urllib.parse import parse_qs

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from backend.notifications import links
from backend.notifications.api.parsers import nesting_depth
from backend.notifications.models import Recipient
from inbox import actions, events, queries, tokens
from inbox.poller import poller

logger = logging.getLogger(__name__)

# Close codes (RFC 6455 §7.4.2 leaves 4000–4999 to applications; README documents them).
CLOSE_INVALID_TOKEN = 4401  # missing, malformed or tampered token, or an unknown user: do not retry
CLOSE_EXPIRED_TOKEN = 4403  # a genuine token past its lifetime: fetch a new one, then reconnect
CLOSE_TOO_MANY = 4429  # too many sockets for the person here, or commands faster than allowed: back off

# A command is a few dozen characters ({"type":"read","id":123}); anything much bigger or deeper is not one.
# Deep nesting made json.loads raise RecursionError (the socket closed 1011), and a deep but parsable
# value could fail later, wherever it is printed or walked.
MAX_FRAME_CHARS = 4096
MAX_JSON_DEPTH = 8


class CommandBucket:
    """One person's commands as a token bucket: ``burst`` at once, then ``rate`` a second (``time.monotonic``).

    Shared by all their sockets on the process and kept across reconnects (``poller.Poller.budget``).
    """

    def __init__(self, burst: int, rate: float) -> None:
        self.burst, self.rate = burst, rate
        self.tokens, self.at = float(burst), time.monotonic()

    def take(self) -> bool:
        """Spend a token for one command: False (nothing spent) when the bucket is empty."""
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def _query_token(scope) -> str:
    query = parse_qs(scope.get("query_string", b"").decode("latin1"))
    return (query.get("token") or [""])[0]


def _parse_command(text: str) -> object:
    """The JSON value of a frame; ``ValueError`` when it is not JSON or nests deeper than ``MAX_JSON_DEPTH``."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if nesting_depth(value) > MAX_JSON_DEPTH:
        raise ValueError("nested too deeply")
    return value


def _non_negative_int(value) -> int | None:
    # bool is an int in Python; {"id": true} is not an id.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@database_sync_to_async
def _open(user_id: str, token: str) -> tuple[int, int, int, list] | None:
    """(recipient pk, unread count, newest id, newest page) in one trip to the database thread; None: no user.

    None too for a token made for an earlier record of this user id, erased since (``links.issued_before``).
    """
    found = Recipient.objects.filter(user_id=user_id).values_list("pk", "created_at").first()
    if found is None or links.issued_before(token, found[1]):
        return None
    recipient = found[0]
    return recipient, queries.unread_count(recipient), queries.last_id(recipient), queries.latest(recipient).payload()


@database_sync_to_async
def _after(recipient: int, after_id: int) -> tuple[list, bool]:
    page = queries.after(recipient, after_id)
    return page.payload(), page.more


@database_sync_to_async
def _poll(recipient: int, after_id: int) -> tuple[list, bool, int]:
    page = queries.after(recipient, after_id)
    return page.payload(), page.more, queries.unread_count(recipient)


class InboxConsumer(AsyncWebsocketConsumer):
    # True from the hello until the server closes the socket: a refused or closing socket's commands and the
    # layer's events for it are dropped (one already queued would otherwise be handled after the close).
    live = False

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # daphne kills an instance that has not finished within its close timeout (a socket flooded with
            # frames): ``disconnect`` never runs then, and the poller kept the consumer, and every frame queued
            # for it, for as long as the process lived.
            poller().unwatch(self)

    async def connect(self) -> None:
        try:
            self.user_id = tokens.verify(_query_token(self.scope))
        except tokens.ExpiredToken:
            return await self._refuse(CLOSE_EXPIRED_TOKEN, "token-expired", "The token has expired; get a new one.")
        except tokens.InvalidToken:
            return await self._refuse(CLOSE_INVALID_TOKEN, "token-invalid", "The token is not valid.")
        # Join before the snapshot: an event committed in between is then
        # either in the snapshot (and dropped by the cursor) or delivered.
        group = events.group_name(self.user_id)
        await self.channel_layer.group_add(group, self.channel_name)
        opened = await _open(self.user_id, _query_token(self.scope))
        if opened is None:
            await self.channel_layer.group_discard(group, self.channel_name)
            return await self._refuse(CLOSE_INVALID_TOKEN, "token-invalid", "The token's user no longer exists.")
        self.recipient, self.unread, self.cursor, page = opened
        limit = settings.INBOX["MAX_SOCKETS_PER_USER"]
        # Watched before the hello: the poller's nudge is a layer message, handled only after connect returns.
        if not poller().watch(self, limit):
            await self.channel_layer.group_discard(group, self.channel_name)
            message = f"This person has {limit} inbox sockets open here already; close one, then reconnect."
            return await self._refuse(CLOSE_TOO_MANY, "too-many-sockets", message)
        self.groups = [group]  # AsyncWebsocketConsumer leaves them on disconnect
        burst, rate = settings.INBOX["COMMAND_BURST"], settings.INBOX["COMMANDS_PER_SECOND"]
        self.commands = poller().budget(self.recipient, lambda: CommandBucket(burst, rate))
        await self.accept()
        await self._send({"type": "hello", "unread": self.unread, "last_id": self.cursor, "messages": page})
        self.live = True

    async def dispatch(self, message: dict) -> None:
        # AsyncConsumer.dispatch first runs close_old_connections in the database thread
        # (one thread, shared by every socket of the process) before each message. Here
        # every database call already does that on its own (database_sync_to_async), and
        # most messages — a new message, a read — touch no database: a send to a thousand
        # sockets would queue a thousand trips to that thread for nothing.
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        if message["type"].startswith("inbox.") and not self.live:
            return
        await handler(message)

    async def _refuse(self, code: int, error: str, message: str) -> None:
        # Accept first: a refusal before the handshake reaches browsers as a
        # bare 403 and close code 1006, hiding why. daphne drops close reasons,
        # so the reason travels as a last JSON message.
        await self.accept()
        await self._send({"type": "error", "code": error, "message": message})
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        poller().unwatch(self)

    async def _send(self, content: dict) -> None:
        await self.send(text_data=json.dumps(content, ensure_ascii=False, separators=(",", ":")))

    # --- client commands -------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.live:
            return  # a refused socket, or one closing: nothing it says counts
        if not self.commands.take():
            self.live = False
            burst, rate = self.commands.burst, self.commands.rate
            message = f"More than {burst} commands at once or {rate:g} a second; reconnect after a pause."
            await self._error("too-many-commands", message)
            return await self.close(code=CLOSE_TOO_MANY)
        if len(text_data or bytes_data or "") > MAX_FRAME_CHARS:
            return await self._error("too-large", f"A command has at most {MAX_FRAME_CHARS} characters.")
        try:
            command = _parse_command(text_data or "")
        except ValueError:
            return await self._error("bad-json", "Send one JSON object per message.")
        kind = command.get("type") if isinstance(command, dict) else None
        handler = self._COMMANDS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return await self._error("unknown-type", f"Unknown command type {kind!r}.")
        await handler(self, command)

    async def _error(self, code: str, message: str, **extra) -> None:
        await self._send({"type": "error", "code": code, "message": message, **extra})

    async def _do_sync(self, command: dict) -> None:
        after = _non_negative_int(command.get("after"))
        if after is None:
            return await self._error("invalid", "sync needs 'after': the last message id seen (0 for none).")
        messages, more = await _after(self.recipient, after)
        if messages:
            self.cursor = max(self.cursor, messages[-1]["id"])
        await self._send({"type": "sync", "after": after, "messages": messages, "more": more})

    async def _change(self, command: dict, action) -> None:
        message_id = _non_negative_int(command.get("id"))
        if not message_id:
            return await self._error("invalid", f"{command['type']} needs 'id': a message id.")
        try:
            # The change reaches this socket and the person's others as an event.
            await database_sync_to_async(action)(self.user_id, message_id, self.recipient)
        except actions.MessageNotFound:
            await self._error("not-found", f"No message {message_id} in this inbox.", id=message_id)
        except actions.UnknownUser:
            await self._gone()

    async def _do_read(self, command: dict) -> None:
        await self._change(command, actions.mark_read)

    async def _do_archive(self, command: dict) -> None:
        await self._change(command, actions.archive)

    async def _do_read_all(self, command: dict) -> None:
        through = command.get("through")
        if through is not None and _non_negative_int(through) is None:
            return await self._error("invalid", "read_all 'through' must be a message id when given.")
        try:
            await database_sync_to_async(actions.mark_all_read)(self.user_id, through, self.recipient)
        except actions.UnknownUser:
            await self._gone()

    async def _gone(self) -> None:
        """The person was deleted while connected: the token no longer names anyone."""
        self.live = False
        await self._error("token-invalid", "The token's user no longer exists.")
        await self.close(code=CLOSE_INVALID_TOKEN)

    async def _do_ping(self, command: dict) -> None:
        await self._send({"type": "pong"})

    # (Not "_sync": AsyncConsumer reads a class attribute of that name to pick sync or async sending.)
    _COMMANDS = {"sync": _do_sync, "read": _do_read, "read_all": _do_read_all, "archive": _do_archive, "ping": _do_ping}

    # --- layer messages (events.NewEvent, events.ChangeEvent, the tick) ------

    async def _not_mine(self, event: dict) -> bool:
        """True, and the socket closed, for an event of another record of this user id: this one was erased."""
        if event.get("recipient", self.recipient) == self.recipient:
            return False
        await self._gone()
        return True

    async def inbox_gone(self, event: dict) -> None:
        """The record was erased (``erasure.py``): the token names nobody any more."""
        if event.get("recipient") == self.recipient:
            await self._gone()

    async def inbox_new(self, event: events.NewEvent) -> None:
        if await self._not_mine(event):
            return
        message = event["message"]
        if message["id"] <= self.cursor:
            return  # already sent by the hello page, a sync or the poll
        if event["prev"] > self.cursor:
            await self._catch_up()  # a message before this one has not reached the socket yet
        else:
            self.cursor = message["id"]
            await self._send({"type": "message.new", "message": message})
        await self._send_unread(event["unread"])

    async def inbox_change(self, event: events.ChangeEvent) -> None:
        if await self._not_mine(event):
            return
        key = "read_at" if event["change"] == "read" else "archived_at"
        await self._send({"type": f"message.{event['change']}", "ids": event["ids"], key: event["at"]})
        await self._send_unread(event["unread"])

    async def inbox_tick(self, event: dict) -> None:
        """The poller saw a newer message than the cursor: catch up, and refresh the count."""
        messages, more, unread = await _poll(self.recipient, self.cursor)
        await self._send_new(messages)
        if more:
            await self._catch_up()
        await self._send_unread(unread)

    async def _catch_up(self) -> None:
        more = True
        while more:
            messages, more = await _after(self.recipient, self.cursor)
            await self._send_new(messages)

    async def _send_new(self, messages: list) -> None:
        for message in messages:
            self.cursor = message["id"]
            await self._send({"type": "message.new", "message": message})

    async def _send_unread(self, count: int) -> None:
        if count != self.unread:
            self.unread = count
            await self._send({"type": "unread", "count": count})
