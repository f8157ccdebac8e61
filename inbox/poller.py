"""The safety net of every inbox socket in this process: one database query per interval, for all of them.

Events can miss a socket: the embedded default's in-memory layer does not
cross processes (a worker's delivery never reaches daphne's layer), and Redis
pub/sub keeps nothing for a daphne that is reconnecting to Redis. So every
``NOTIFY_INBOX_POLL_INTERVAL`` seconds the process asks PostgreSQL for the
newest message id of each person with an open socket — one query, however
many sockets — and nudges (``inbox.tick``) only the sockets whose cursor is
behind; each catches up with the same code as ``sync``. A socket per query
would cost a thousand sockets 33 queries a second at a 30 s interval.
"""

import asyncio
import logging
import weakref
from collections import Counter, OrderedDict, defaultdict

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection
from django.db.models import Max

from inbox.models import InboxMessage

logger = logging.getLogger(__name__)

_CHUNK = 1000  # recipients per query
MAX_BUDGETS = 100_000  # people whose command budget a process remembers


def newest_ids(recipients: list[int]) -> dict[int, int]:
    """``{recipient pk: newest message id}`` for those who have messages (index ``inbox_recipient_id_idx``).

    On PostgreSQL one probe of that index per recipient (LATERAL, ``ORDER BY id DESC LIMIT 1``): ``MAX(id) …
    GROUP BY recipient_id`` read every message of every person with an open socket at each poll, 47 ms for
    1,000 sockets of 100 messages each, growing with their inboxes (8 ms by probes, whatever their size).
    """
    newest: dict[int, int] = {}
    for start in range(0, len(recipients), _CHUNK):
        chunk = recipients[start : start + _CHUNK]
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(_NEWEST_SQL, [chunk])
                newest.update(cursor.fetchall())
            continue
        rows = (
            InboxMessage.objects.filter(recipient_id__in=chunk)
            .values("recipient_id")
            .annotate(newest=Max("id"))
            .order_by()
        )
        newest.update((row["recipient_id"], row["newest"]) for row in rows)
    return newest


_NEWEST_SQL = (
    "SELECT r.id, m.id FROM unnest(%s::bigint[]) AS r(id) CROSS JOIN LATERAL"
    f" (SELECT i.id FROM {InboxMessage._meta.db_table} i WHERE i.recipient_id = r.id ORDER BY i.id DESC LIMIT 1) m"
)


class Poller:
    """Watches the open sockets of one event loop (daphne has one); runs while any is open."""

    def __init__(self) -> None:
        self.sockets: dict[str, object] = {}  # channel name → InboxConsumer
        self.per_recipient: Counter[int] = Counter()  # recipient pk → sockets watched
        self.budgets: OrderedDict[int, object] = OrderedDict()  # recipient pk → CommandBucket, most recent last
        self.task: asyncio.Task | None = None

    def budget(self, recipient: int, make):
        """The person's command budget on this process, ``make()`` on first use; kept after their sockets close.

        Per person, not per socket: ten sockets reconnecting in turn each got a fresh burst (315 commands a
        second from one token). The ``MAX_BUDGETS`` people seen last are remembered (a bucket is a few bytes).
        """
        bucket = self.budgets.pop(recipient, None) or make()
        self.budgets[recipient] = bucket
        if len(self.budgets) > MAX_BUDGETS:
            self.budgets.popitem(last=False)
        return bucket

    def watch(self, consumer, limit: int) -> bool:
        """Watch ``consumer`` unless its person has ``limit`` sockets watched already: then False, nothing changed."""
        if self.per_recipient[consumer.recipient] >= limit:
            return False
        self.sockets[consumer.channel_name] = consumer
        self.per_recipient[consumer.recipient] += 1
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())
        return True

    def unwatch(self, consumer) -> None:
        """Stop watching ``consumer``; a no-op for one not watched (refused, or unwatched already)."""
        if self.sockets.pop(getattr(consumer, "channel_name", None), None) is None:
            return
        self.per_recipient[consumer.recipient] -= 1
        if not self.per_recipient[consumer.recipient]:
            del self.per_recipient[consumer.recipient]
        if not self.sockets and self.task is not None:
            self.task.cancel()
            self.task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(settings.INBOX["POLL_INTERVAL"])
            try:
                await self._nudge_lagging()
            except Exception:
                logger.exception("inbox: the sockets' catch-up poll failed; trying again")

    async def _nudge_lagging(self) -> None:
        by_recipient = defaultdict(list)
        for consumer in list(self.sockets.values()):
            by_recipient[consumer.recipient].append(consumer)
        newest = await database_sync_to_async(newest_ids)(list(by_recipient))
        for recipient, last in newest.items():
            for consumer in by_recipient[recipient]:
                if consumer.cursor < last:
                    # Through the layer, so the catch-up runs between the socket's other handlers.
                    await consumer.channel_layer.send(consumer.channel_name, {"type": "inbox.tick"})


_pollers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Poller]" = weakref.WeakKeyDictionary()


def poller() -> Poller:
    """The poller of the running event loop."""
    loop = asyncio.get_running_loop()
    if loop not in _pollers:
        _pollers[loop] = Poller()
    return _pollers[loop]
