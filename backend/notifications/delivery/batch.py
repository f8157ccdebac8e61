"""Delivery in batches: the standard tier's hot path, set-based and with concurrent provider calls.

A standard-tier batch worker (``worker.py``) pops up to ``NOTIFY_STANDARD_BATCH`` tasks at once and
hands their ids to ``deliver_batch``. Where a single delivery costs about eight SQL round trips, seven
Redis calls and one blocking HTTP call per notification, a batch costs, per provider it uses:

1. one SELECT of the rows still queued (recipient joined; their kinds and template versions in one
   query each, one instance per distinct row; push devices in one more);
2. one breaker check and one Lua call taking the batch's budget tokens. What the budget cannot give
   now is re-scheduled in one ZADD without touching its row, as a single delivery that must wait
   is; standard traffic only ever takes from its own bucket, and from its own share of the bulkhead
   slots (step 4), so the high tier's reserve stays whole (``budget.py``);
3. then wave by wave (``WAVE`` calls, fewer when the bulkhead's standard share has fewer slots free;
   none free, it waits for one), two statements on PostgreSQL (one transaction each elsewhere):
   the claim, ``UPDATE … SET state='sending', attempt_count=1 WHERE id = ANY(…) AND state='queued'
   AND attempt_count=0 RETURNING id``, with the history rows and the attempt rows of the rows it
   returned, *before* the calls: two workers racing on the same ids claim disjoint sets, so each
   notification is sent once, and the claimed ids join this process's lease heartbeat; the calls
   concurrently on kept-alive connections (``Provider.request``, libcurl's multi interface); one pipeline of
   sent-markers *before* the status write and one of breaker outcomes; then one statement recording
   every attempt's result and moving the accepted rows to ``sent`` with their history.

A notification row changes twice (claimed, sent): each change of its state is an update through the
table's indexes, the largest part of what PostgreSQL spends on a delivery. A breaker that opens during
a wave stops the rest of the batch for that provider: the waves not started were never claimed and
are re-scheduled after the breaker's wait without touching their rows, as at the gate; so are they
after an error (the database gone, a bug), a few seconds later. A killed worker loses at most its
wave in flight to a duplicate (those calls have no sent-marker): its claims expire with their lease
and the sweeper hands them out again; the rows of the waves it had not started are still queued, and
the sweeper enqueues them again once they have waited ``NOTIFY_VISIBILITY_TIMEOUT`` without a task.
A row a wave's claim does not win is left alone (another worker's, a held campaign's, or retried
since the batch read it: its retry or release enqueued it again).

Everything unusual goes through the single-delivery code of ``dispatch`` row by row, so each
guarantee of DESIGN.md §2 has one implementation: a retry (``attempt_count`` > 0: sent-marker and
attempt rows are checked first), a push to several devices or none, a row past its validity or that no longer renders, a
failed call (retry with full jitter, dead letter, permanent failure, address disabled). The high
tier never comes here: it keeps batch size 1 on its own queue and workers.
"""

import json
import logging
import os
import random
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime
from datetime import time as time_of_day
from decimal import Decimal
from typing import Any

import psycopg
from django.db import connection, models, transaction
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.utils import timezone

from backend.notifications import actions, instances, metric_counters, rendering
from backend.notifications.actions.delivery import _secrets_at_rest
from backend.notifications.array_param import key_array
from backend.notifications.delivery import batch_rows, breaker, budget, dispatch, lease, sent_marker
from backend.notifications.delivery.dispatch import Target
from backend.notifications.delivery.shared_state import RedisUnavailable
from backend.notifications.models import Attempt, Channel, Device, Notification, State, StateChange
from backend.notifications.providers import concurrent_http, http
from backend.notifications.providers.base import OutboundMessage, ProviderError, providers_for_channel

logger = logging.getLogger(__name__)

# Calls in flight at once per batch, and the grain at which an opening breaker stops the batch.
WAVE = 100
# Seconds before the items of a batch that failed are tried again: long enough for a restarting database.
_ERROR_WAIT = (1.0, 5.0)


@dataclass
class Item:
    """One notification of a batch on its way through: its target, then its message, slot, attempt and outcome."""

    notification: Notification
    target: Target
    message: OutboundMessage | None = None
    slot: budget.Slot | None = None
    attempt_id: int | None = None
    reference: str = ""
    error: ProviderError | None = None
    latency_ms: int = 0
    id: str = ""
    priced: bool = False

    def __post_init__(self):
        self.id = str(self.notification.pk)


class Caller:
    """One batch worker thread's provider calls: a wave's calls at once, ``call_all`` returning when all answered.

    HTTP adapters' calls go together on the thread's libcurl multi handle and its kept-alive
    connections (``concurrent_http``); the others (SMTP, Web Push, the inbox, the fakes) run their
    ``send`` meanwhile in a few threads (as many as ``asyncio.to_thread`` would give them).
    """

    def __init__(self, connections: int = WAVE):
        self.transport = concurrent_http.Transport(connections)
        self._threads: ThreadPoolExecutor | None = None

    def call_all(self, items: list[Item]) -> None:
        """Call each item's provider with its message; sets ``reference`` or ``error`` and ``latency_ms``."""
        calls: list[tuple[Item, http.Request]] = []
        sent_alone: list[tuple[Item, Future]] = []
        for item in items:
            try:
                request = item.target.provider.request(item.message)
            except Exception as exc:
                _failed(item, exc)
                continue
            if request is not None:
                calls.append((item, request))
            else:
                if self._threads is None:
                    self._threads = ThreadPoolExecutor(min(32, (os.cpu_count() or 1) + 4), "batch-send")
                sent_alone.append((item, self._threads.submit(_send_alone, item)))
        outcomes = self.transport.post_all([request for _, request in calls]) if calls else []
        for (item, _), outcome in zip(calls, outcomes, strict=True):
            item.latency_ms = round(outcome.seconds * 1000)
            try:
                if outcome.error is not None:
                    raise outcome.error
                item.reference = dispatch.storable_reference(item.target.provider.reference(outcome.answer))
            except Exception as exc:
                _failed(item, exc)
        for _, future in sent_alone:
            future.result()

    def close(self) -> None:
        """Close the connections and the threads."""
        self.transport.close()
        if self._threads is not None:
            self._threads.shutdown()


def _send_alone(item: Item) -> None:
    """``item``'s provider ``send`` (an adapter that speaks no HTTP API), timed; its outcome set on ``item``."""
    started = time.monotonic()
    try:
        item.reference = dispatch._send(item.notification, item.target.provider, item.message)
    except ProviderError as exc:
        item.error = exc
    item.latency_ms = round((time.monotonic() - started) * 1000)


def _failed(item: Item, exc: Exception) -> None:
    """Record on ``item`` what its call raised (``dispatch.provider_error``): never a crash, secrets redacted."""
    item.error = dispatch.provider_error(item.notification, item.target.provider, exc)


def deliver_batch(ids: Iterable[str], tier: str, caller: Caller) -> None:
    """Deliver the notifications ``ids`` of ``tier`` that are still queued, as one batch (see the module doc).

    Ids no longer queued are skipped, as by ``dispatch.deliver``. Raises only what the database or
    an unexpected bug raises; a claimed row left behind then is the lease's and the sweeper's.
    """
    rows = batch_rows.queued(list(ids))
    items, single = _split(rows)
    by_provider: dict[str, list[Item]] = {}
    for item in items:
        by_provider.setdefault(item.target.provider.name, []).append(item)
    for group in by_provider.values():
        _deliver_group(group, tier, caller)
    for notification in single:
        dispatch.deliver(str(notification.pk))


def _split(rows: list[Notification]) -> tuple[list[Item], list[Notification]]:
    """The rows the batch path takes (first try, one destination), and those left to ``dispatch.deliver``."""
    push = [n.recipient_id for n in rows if n.channel == Channel.PUSH and n.attempt_count == 0]
    devices: dict[int, list[Device]] = {}
    active = Device.objects.filter(recipient_id__in=push, disabled_at__isnull=True)
    # Without Model.__init__, and without the two timestamps no delivery reads: a campaign's batch of 200 reads 100.
    for device in instances.load_all(active, ("created_at", "last_seen_at")):
        devices.setdefault(device.recipient_id, []).append(device)
    items, single = [], []
    routes: dict[str, list] = {}
    now = timezone.now()
    for notification in rows:
        if notification.channel not in routes:
            routes[notification.channel] = providers_for_channel(notification.channel)
        providers = routes[notification.channel]
        if notification.attempt_count or notification.is_expired(now) or not providers:
            single.append(notification)
            continue
        if notification.channel != Channel.PUSH:
            items.append(Item(notification, Target(providers[0])))
            continue
        destinations = dispatch.device_targets(providers, devices.get(notification.recipient_id, []))
        if len(destinations) == 1:
            items.append(Item(notification, destinations[0][0]))
        else:
            single.append(notification)
    return items, single


def _reschedule(delays: dict[str, float], tier: str) -> None:
    """Put unclaimed notifications back on the queue after their delay (seconds); their rows stay untouched."""
    from backend.notifications.tasks import schedule_deliveries

    if not delays:
        return
    try:
        schedule_deliveries(delays, tier)
    except RedisUnavailable as exc:
        # Still queued: the sweeper enqueues them again once the queue is back.
        logger.warning("%d notifications not re-scheduled (%s): left queued for the sweeper", len(delays), exc)


def _gate(items: list[Item], tier: str) -> list[Item]:
    """Breaker and budget for one provider's part of the batch: the items that may go now.

    The others are re-scheduled: while the breaker is open after its wait; a half-open breaker lets
    one probe through; past the budget from the bucket's next token on, one per token. The bulkhead
    is taken wave by wave (``_send_waves``): it caps calls in flight, not notifications claimed.
    """
    config = items[0].target.provider.config
    verdict = breaker.admit(config.name)
    later = {} if verdict == "allow" else {item.id: random.uniform(*dispatch._BREAKER_WAIT) for item in items[1:]}
    if verdict == "deny":
        later[items[0].id] = random.uniform(*dispatch._BREAKER_WAIT)
        _reschedule(later, tier)
        return []
    if verdict == "probe":
        items = items[:1]
    granted, wait = budget.take_tokens(config, tier, len(items))
    rate = (budget.buckets_for(config, tier) or [budget.Bucket("", 1.0, 1.0)])[-1].rate
    later.update({item.id: wait + n / rate for n, item in enumerate(items[granted:])})
    _reschedule(later, tier)
    return items[:granted]


def _deliver_group(items: list[Item], tier: str, caller: Caller) -> None:
    """Gate one provider's part of a batch, then claim and send it wave by wave."""
    items = _gate(items, tier)
    if items:
        _send_waves(items, tier, caller)


def _send_waves(items: list[Item], tier: str, caller: Caller) -> None:
    """Send the items wave by wave, each as large as ``WAVE`` and the free bulkhead slots allow.

    Once a wave leaves the breaker open, the items not sent are re-scheduled after its wait; they
    were never claimed, so their rows stay as they are (as when the breaker is open at the gate).
    An error (the database gone, a bug) re-schedules the items no wave claimed before it is raised:
    their tasks were popped, and a queued row without a task waits for the sweeper's visibility timeout.
    """
    wave: list[Item] = []
    try:
        while items:
            slots = _slots(items[0].target.provider.config, min(WAVE, len(items)), tier)
            wave, items = items[: len(slots)], items[len(slots) :]
            for item, slot in zip(wave, slots, strict=True):
                item.slot = slot
            if _send_wave(wave, tier, caller):
                _reschedule({item.id: random.uniform(*dispatch._BREAKER_WAIT) for item in items}, tier)
                return
    except BaseException:
        _reschedule({item.id: random.uniform(*_ERROR_WAIT) for item in wave + items if item.attempt_id is None}, tier)
        raise


def _slots(config, count: int, tier: str) -> list[budget.Slot]:
    """Between 1 and ``count`` bulkhead slots of ``tier``'s share, waiting while all are taken.

    The wait holds no claimed row: a wave claims its rows once it has its slots. A slot frees within
    the provider's timeout at worst (a dead worker's expires, ``budget.acquire_slots``).
    """
    while not (slots := budget.acquire_slots(config, count, tier)):
        time.sleep(random.uniform(0.005, 0.05))
    return slots


def _prepared(wave: list[Item]) -> tuple[list[Item], list[Item]]:
    """The wave's items with their messages built, and those left to the single path.

    Those are the rows past their validity or that no longer render: ``dispatch.deliver`` claims them and
    expires them, or fails them with the render error, as any row.
    """
    ready, single = [], []
    now = timezone.now()
    for item in wave:
        notification = item.notification
        if not notification.is_expired(now):
            try:
                item.message = dispatch.build_message(notification, item.target.device)
                ready.append(item)
                continue
            except rendering.RenderError:
                pass
        single.append(item)
    return ready, single


def _send_wave(wave: list[Item], tier: str, caller: Caller) -> bool:
    """Claim, call and record one wave; True when the provider's breaker is open after it.

    Two statements on PostgreSQL: the claim with its history and attempt rows before any call, then the
    attempts' results with the move to ``sent`` and its history, after the sent-markers. A row the claim
    did not win is left alone: another worker's, a paused or cancelled campaign's (its feeder hands it
    over again on resume), or one retried since the batch read it, which its retry or the sweeper's
    release enqueued again. The wave's bulkhead slots go back whatever happens, not at their expiry.
    """
    provider, held = wave[0].target.provider.name, [item.slot for item in wave]
    try:
        ready, single = _prepared(wave)
        claimed = _claim(ready, tier, provider)
        mine = [item for item in ready if item.id in claimed]
        budget.release_slots([item.slot for item in wave if item.id not in claimed])
        held = [item.slot for item in mine]
        opened = False
        if mine:
            with lease.held_many(list(claimed), tier):
                caller.call_all(mine)
                budget.release_slots(held)
                held = []
                opened = _record(mine, provider)
    finally:
        budget.release_slots(held)
    for item in single:
        dispatch.deliver(item.id)
    return opened


def _record(wave: list[Item], provider: str) -> bool:
    """The wave's outcomes once its calls answered; True when the provider's breaker is open after them.

    The proof of acceptance goes to Redis before the status write (sent_marker.py), then one statement
    records every attempt's result and moves the accepted rows to ``sent``; each failure takes the single
    delivery's way (retry with full jitter, dead letter, permanent failure, address disabled).
    """
    accepted = [item for item in wave if item.error is None]
    sent_marker.put_many({item.id: (provider, item.reference) for item in accepted})
    opened = breaker.record_many(provider, [item.error is None or item.error.permanent for item in wave])
    _mark_sent(wave, accepted, provider)
    for item in wave:
        if item.error is not None:
            if item.error.address_invalid:
                actions.disable_address(item.notification, item.target.device, str(item.error))
            dispatch._after_failure(item.notification, item.error)
    return opened


def _attempt_results(wave: list[Item]) -> tuple[list[int], dict[str, dict[int, Any]]]:
    """``update_rows``'s ids and per-row values recording each attempt's result, latency, reference or error."""
    results = {}
    for item in wave:
        if item.error is None:
            results[item.attempt_id] = Attempt.Result.SENT
        else:
            results[item.attempt_id] = Attempt.Result.PERMANENT if item.error.permanent else Attempt.Result.TRANSIENT
    per_row = {
        "result": results,
        "latency_ms": {item.attempt_id: item.latency_ms for item in wave},
        "provider_ref": {item.attempt_id: item.reference for item in wave if item.error is None},
        "error": {item.attempt_id: str(item.error)[:2000] for item in wave if item.error is not None},
        # A refused call is not billed (see ``actions.finish_attempt``); a priced one's quote becomes 0.
        "cost": {item.attempt_id: actions.NOT_BILLED for item in wave if item.error is not None and item.priced},
    }
    return list(results), per_row


def _attempt_rows(wave: list[Item], provider: str) -> list[dict[str, Any]]:
    """The attempt row of each item of a wave, first attempts all (``number`` 1), before any call."""
    now = timezone.now()
    rows = []
    for item in wave:
        notification = item.notification
        sms = {}
        if notification.channel == Channel.SMS:
            sms = dispatch.sms_cost(item.message, item.target.provider, notification.recipient)
            item.priced = "cost" in sms
        device = item.target.device
        rows.append(
            {"notification_id": notification.pk, "number": 1, "provider": provider,
             "device_id": device.pk if device else None, "started_at": now, **sms}
        )  # fmt: skip
    return rows


def _mark_sent(wave: list[Item], accepted: list[Item], provider: str) -> None:
    """Every attempt's result, and ``actions.mark_sent`` for the accepted rows: one conditional UPDATE and its history.

    Per row: the provider's reference, and the params masked at rest (``_secrets_at_rest``).
    """
    attempt_ids, per_attempt = _attempt_results(wave)
    masked = {}
    for item in accepted:
        if at_rest := _secrets_at_rest(item.notification):
            masked[item.id] = at_rest["params"]
    sent = {"provider": provider, "sent_at": timezone.now(), "last_error": ""}
    per_row = {"provider_ref": {item.id: item.reference for item in accepted}, "params": masked}
    ids = [item.id for item in accepted]
    if connection.vendor == "postgresql":
        results = update_statement(Attempt, attempt_ids, {}, per_attempt)
        moved = _move(ids, State.SENDING, State.SENT, "", sent, per_row, before=results)
    else:
        with transaction.atomic():
            update_rows(Attempt, attempt_ids, {}, per_attempt)
            moved = _move(ids, State.SENDING, State.SENT, "", sent, per_row) if ids else set()
    metric_counters.add(_counted(wave, per_attempt["result"], moved, provider, sent["sent_at"]))


def _counted(wave: list[Item], results: dict[int, str], moved: set[str], provider: str, sent_at: datetime) -> Counter:
    """What a recorded wave adds to the /metrics counters (one Redis pipeline): each attempt's result, the rows sent.

    The claim counted its own move to ``sending`` (``_claim``), whatever happens to the wave after it. Latency
    is an API send's alone, as in ``record_state_change``.
    """
    counts: Counter = Counter(("attempt", provider, results[item.attempt_id]) for item in wave)
    sent: Counter = Counter()
    latencies: dict[str, list[float]] = {}
    for item in wave:
        if item.id in moved:
            notification = item.notification
            sent[notification.priority] += 1
            if notification.campaign_id is None:
                seconds = (sent_at - notification.due_at).total_seconds()
                latencies.setdefault(notification.priority, []).append(seconds)
    for tier, n in sent.items():
        counts.update(metric_counters.entered(tier, State.SENDING, State.SENT, n, provider=provider))
    for tier, seconds in latencies.items():
        counts.update(metric_counters.sent_latencies(tier, seconds))
    return counts


def _claim(wave: list[Item], tier: str, provider: str) -> set[str]:
    """Claim the wave's rows still queued on their first try, with their lease, history and attempt rows.

    Returns the ids this worker won; each item won gets its ``attempt_id`` and an ``attempt_count`` of 1.
    One statement on PostgreSQL (the attempt rows inserted only for the rows the UPDATE returned), one
    transaction elsewhere. Of two workers racing on the same ids each row goes to one (see ``_move``).
    """
    if not wave:
        return set()
    now = timezone.now()
    fields = {"sending_at": now, "lease_until": lease.expiry(tier, now), "attempt_count": 1}
    rows = _attempt_rows(wave, provider)
    ids = [item.id for item in wave]
    first_try = f"{connection.ops.quote_name(Notification._meta.db_table)}.attempt_count = 0"
    extra_where = f"{first_try} AND {actions.claimable_sql()}"
    if connection.vendor == "postgresql":
        move, move_params = _move_statement(ids, State.QUEUED, State.SENDING, None, fields, extra_where=extra_where)
        insert, params = insert_statement(Attempt, rows, returning=("id", "notification"), only_moved="notification")
        with _bound_cursor() as cursor:
            cursor.execute(f"{move} {insert}", move_params + params)
            attempts = {str(notification): attempt for attempt, notification in cursor.fetchall()}
    else:
        with transaction.atomic():
            won = _move(ids, State.QUEUED, State.SENDING, None, fields, extra_where=extra_where)
            mine = [row for row in rows if str(row["notification_id"]) in won]
            keys = [str(row["notification_id"]) for row in mine]
            attempts = dict(zip(keys, insert_rows(Attempt, mine, "id"), strict=True))
    metric_counters.add(metric_counters.entered(tier, State.QUEUED, State.SENDING, len(attempts)))
    for item in wave:
        if item.id in attempts:
            item.attempt_id = attempts[item.id]
            item.notification.attempt_count = 1
    return set(attempts)


def _bound_cursor():
    """A cursor on the current PostgreSQL connection that sends the parameters apart from the statement.

    Django's cursors bind on the client: psycopg quotes each parameter into the statement's text, and
    PostgreSQL parses it back, which for a wave's arrays of keys, references and prices is kilobytes each
    time. Sent apart (the extended query protocol, no statement prepared), neither happens. Wrapped as
    Django wraps its own cursors: queries are logged when Django logs them, errors are Django's.
    """
    # As Django's own cursors: a kept connection is checked once after close_old_connections (CONN_HEALTH_CHECKS).
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = psycopg.Cursor(connection.connection)
    return _BoundDebugCursor(raw, connection) if connection.queries_logged else connection.make_cursor(raw)


class _BoundDebugCursor(CursorDebugWrapper):
    """Django's debug cursor, logging a server-bound statement with its parameters quoted in.

    Django logs the text psycopg sent, which here has ``$n`` placeholders that nobody could run
    again (``EXPLAIN`` it, say); composed, the log reads as for Django's own cursors.
    """

    def execute(self, sql, params=None):
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)


def _move(
    ids: list[str],
    from_state: str,
    to_state: str,
    reason: str | None,
    fields: dict[str, Any],
    per_row: dict[str, dict[str, Any]] | None = None,
    extra_where: str = "",
    before: tuple[str, list] | None = None,
) -> set[str]:
    """Move the rows ``ids`` still in ``from_state`` to ``to_state`` in one UPDATE … RETURNING, plus their history.

    The set-based twin of ``actions.transitions.transition``: ``fields`` are set on every row,
    ``per_row`` maps a field to ``{id: value}``, ``reason`` None leaves the rows' reason as it is,
    ``extra_where`` is a raw SQL condition the rows must meet too (the claim's ``actions.claimable_sql``),
    ``before`` a statement (PostgreSQL only) run first in the same one. Returns the ids of the rows moved,
    in one transaction with their StateChange rows. PostgreSQL re-checks the state of a row another
    transaction just changed, and SQLite runs one writer at a time, so of two racing moves each row goes to one.
    """
    if connection.vendor == "postgresql":
        sql, params = _move_statement(ids, from_state, to_state, reason, fields, per_row, extra_where, before)
        with _bound_cursor() as cursor:
            cursor.execute(f"{sql} SELECT id FROM moved", params)
            return {str(row[0]) for row in cursor.fetchall()}
    if before is not None:
        raise ValueError("before: one statement with the move is PostgreSQL's")
    fields = _move_fields(fields, to_state, reason)
    with transaction.atomic():
        moved = {str(pk) for pk in update_rows(Notification, ids, fields, per_row, ("state", from_state), extra_where)}
        _insert_history(list(moved), from_state, to_state, reason or "")
    return moved


def _move_fields(fields: dict[str, Any], to_state: str, reason: str | None) -> dict[str, Any]:
    fields = {**fields, "state": to_state, "updated_at": timezone.now()}
    if reason is not None:
        fields["reason"] = reason
    return fields


def _move_statement(
    ids: list[str],
    from_state: str,
    to_state: str,
    reason: str | None,
    fields: dict[str, Any],
    per_row: dict[str, dict[str, Any]] | None = None,
    extra_where: str = "",
    before: tuple[str, list] | None = None,
) -> tuple[str, list]:
    """``_move`` on PostgreSQL up to its last part: ``WITH [done AS (before),] moved AS (UPDATE …), history AS (…)``.

    The caller ends it with a statement reading the CTE ``moved`` (the ids moved): a round trip instead of
    four (BEGIN, UPDATE, INSERT, COMMIT), or more with what else it does in the same statement.
    """
    fields = _move_fields(fields, to_state, reason)
    sql, params = update_statement(Notification, ids, fields, per_row, ("state", from_state), extra_where)
    history, history_params = _history_sql(from_state, to_state, reason or "")
    ctes, cte_params = [f"moved AS ({sql})", f"history AS ({history})"], params + history_params
    if before is not None:
        ctes.insert(0, f"done AS ({before[0]})")
        cte_params = before[1] + cte_params
    return f"WITH {', '.join(ctes)}", cte_params


def _history_sql(from_state: str, to_state: str, reason: str) -> tuple[str, list]:
    """``_insert_history`` as an INSERT … SELECT from the CTE ``moved`` (the ids an UPDATE returned)."""
    ops, meta = connection.ops, StateChange._meta
    names = ("notification", "from_state", "to_state", "reason", "at")
    columns = ", ".join(ops.quote_name(meta.get_field(name).column) for name in names)
    sql = f"INSERT INTO {ops.quote_name(meta.db_table)} ({columns}) SELECT moved.id, %s, %s, %s, %s FROM moved"
    return sql, [from_state, to_state, reason, timezone.now()]


def _insert_history(ids: list[str], from_state: str, to_state: str, reason: str) -> None:
    """One StateChange row per id (``record_state_change`` for many)."""
    now = timezone.now()
    insert_rows(
        StateChange,
        [{"notification_id": pk, "from_state": from_state, "to_state": to_state, "reason": reason, "at": now}
         for pk in ids],
    )  # fmt: skip


def insert_rows(model: type[models.Model], rows: list[dict[str, Any]], returning: str | None = None) -> list:
    """One multi-row ``INSERT`` of ``rows`` (``{attname: value}``; fields not named take their default).

    ``bulk_create`` without a model instance and its checks per row; returns the ``returning``
    column of each row in order (``RETURNING``, as ``update_rows``), else an empty list.
    """
    if not rows:
        return []
    sql, params = insert_statement(model, rows, returning)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()] if returning else []


def insert_statement(
    model: type[models.Model],
    rows: list[dict[str, Any]],
    returning: str | tuple[str, ...] | None = None,
    only_moved: str | None = None,
) -> tuple[str, list]:
    """``insert_rows``'s statement and parameters (``rows`` not empty).

    ``returning`` names one field or several; ``only_moved`` (PostgreSQL) names a foreign key to a
    notification: only the rows whose notification is in the CTE ``moved`` go in (``_move_statement``).
    """
    meta, ops = model._meta, connection.ops
    fields = [field for field in meta.concrete_fields if not field.primary_key]
    columns = [_column(field, [row.get(field.attname, _UNSET) for row in rows]) for field in fields]
    names = ", ".join(ops.quote_name(field.column) for field in fields)
    table = ops.quote_name(meta.db_table)
    if connection.vendor == "postgresql":
        keep = None if only_moved is None else fields.index(meta.get_field(only_moved))
        sql, params = _insert_sql_postgresql(fields, columns, len(rows), keep)
        sql = f"INSERT INTO {table} ({names}) {sql}"
    elif only_moved is not None:
        raise ValueError("only_moved: one statement with the move is PostgreSQL's")
    else:
        one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        sql = f"INSERT INTO {table} ({names}) VALUES {', '.join([one] * len(rows))}"
        params = [value for row in zip(*(column.values(len(rows)) for column in columns), strict=True) for value in row]
    if returning:
        returned = (returning,) if isinstance(returning, str) else returning
        sql += f" RETURNING {', '.join(ops.quote_name(meta.get_field(name).column) for name in returned)}"
    return sql, params


# A field a row of ``insert_rows`` does not name: it takes the field's default.
_UNSET = object()


@dataclass
class _Column:
    """One column's values prepared for the database: ``same`` when every row has the one value ``value``."""

    same: bool
    value: Any = None
    many: list | str | None = None

    def values(self, count: int) -> list:
        """The column's ``count`` values, one per row."""
        return [self.value] * count if self.same else self.many


def _column(field: models.Field, values: list) -> _Column:
    """``values`` of ``field`` prepared for the database; one value when every row has the same.

    On PostgreSQL a column of uuid keys (a foreign key to a notification) is one ``key_array`` string.
    """
    prep = _preparer(field)
    first = values[0]
    if all(value is first or (type(value) is type(first) and value == first) for value in values):
        return _Column(True, prep(first))
    if connection.vendor == "postgresql" and field.db_type(connection) == "uuid" and _UNSET not in values:
        return _Column(False, many=key_array(values))
    return _Column(False, many=[prep(value) for value in values])


def _preparer(field: models.Field) -> Callable[[Any], Any]:
    """``field.get_db_prep_save`` (``_UNSET``: the field's default) that prepares each distinct value once.

    A batch's columns repeat a few values (a state, a provider, a timestamp, attempt number 1):
    preparing each row's value again was a fifth of a batch's CPU.
    """
    prepared: dict[tuple[type, Any], Any] = {}

    def prep(value: Any) -> Any:
        if value is _UNSET:
            value = field.get_default()
        try:
            key = (type(value), value)
            if key not in prepared:
                prepared[key] = field.get_db_prep_save(value, connection)
            return prepared[key]
        except TypeError:  # unhashable (a JSON dict): prepared each time
            return field.get_db_prep_save(value, connection)

    return prep


def _insert_sql_postgresql(
    fields: list[models.Field], columns: list[_Column], count: int, keep: int | None = None
) -> tuple[str, list]:
    """``insert_rows``'s ``SELECT`` on PostgreSQL: a column with one value is one parameter, the others arrays.

    One array per column joined by ``unnest`` keeps the text the same whatever the row count, so
    psycopg parses it once; a value shared by every row is sent once instead of in an array. ``keep``,
    the index of a notification key among ``fields``, keeps only the rows whose key the CTE ``moved`` holds.
    """
    if all(column.same for column in columns):
        columns = [_Column(False, many=columns[0].values(count)), *columns[1:]]
    selects, scalars, arrays, arrays_sql = [], [], [], []
    for field, column in zip(fields, columns, strict=True):
        if column.same:
            selects.append(f"%s::{field.db_type(connection)}")
            scalars.append(column.value)
        else:
            selects.append(f"u.c{len(arrays)}")
            arrays_sql.append(f"%s::{field.db_type(connection)}[]")
            arrays.append(column.many)
    names = ", ".join(f"c{number}" for number in range(len(arrays)))
    sql = f"SELECT {', '.join(selects)} FROM unnest({', '.join(arrays_sql)}) AS u({names})"
    params = scalars + arrays
    if keep is not None:
        sql += f" WHERE {selects[keep]} IN (SELECT id FROM moved)"
        if columns[keep].same:
            params.append(columns[keep].value)
    return sql, params


def update_rows(
    model: type[models.Model],
    ids: list,
    fields: dict[str, Any],
    per_row: dict[str, dict[Any, Any]] | None = None,
    where: tuple[str, Any] | None = None,
    extra_where: str = "",
) -> list:
    """One ``UPDATE`` of ``model``'s rows ``ids``: ``fields`` on all, ``per_row`` ``{field: {id: value}}`` each its own.

    Per-row values are a JSON object per field keyed by the row's key on PostgreSQL, a ``CASE`` on the primary
    key elsewhere (rows not named keep theirs); ``where`` ``(text field, value)`` adds a condition that no
    index serves (the rows are found by key), ``extra_where`` a raw SQL one; the answer is the primary
    keys of the rows changed (``RETURNING``: PostgreSQL, and SQLite since 3.35). Raw SQL
    because Django's ``bulk_update`` builds one ``When`` expression per row and field, which cost more
    than the delivery it records (a profile of 4,000: 18 of 42 s).
    """
    sql, params = update_statement(model, ids, fields, per_row, where, extra_where)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [model._meta.pk.to_python(row[0]) for row in cursor.fetchall()]


def update_statement(
    model: type[models.Model],
    ids: list,
    fields: dict[str, Any],
    per_row: dict[str, dict[Any, Any]] | None = None,
    where: tuple[str, Any] | None = None,
    extra_where: str = "",
) -> tuple[str, list]:
    """``update_rows``'s statement and parameters, ``UPDATE … RETURNING pk`` (for a CTE too)."""
    meta, ops = model._meta, connection.ops
    pk = meta.pk
    sets, params = [], []
    for name, value in fields.items():
        field = meta.get_field(name)
        sets.append(f"{ops.quote_name(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    per_row = {name: values for name, values in (per_row or {}).items() if values}
    table, key = ops.quote_name(meta.db_table), ops.quote_name(pk.column)
    if connection.vendor == "postgresql":
        sql, row_params = _update_sql_postgresql(model, ids, per_row, sets)
    else:
        sql, row_params = _update_sql(model, ids, per_row, sets)
    condition, keys = "", []
    if where is not None:
        # Concatenated, so that no index on the column can serve the condition and the rows are found by their
        # primary key whatever the statistics say: ``state = 'queued'`` matched the queue's partial index, and with
        # 10 queued rows estimated (statistics older than the backlog) a claim of 200 hashed all 60,000 queued rows.
        condition = f" AND ({table}.{ops.quote_name(meta.get_field(where[0]).column)} || '') = %s"
        keys.append(where[1])
    if extra_where:
        condition += f" AND {extra_where}"
    return f"{sql}{condition} RETURNING {table}.{key}", params + row_params + keys


def _update_sql(model, ids: list, per_row: dict[str, dict], sets: list[str]) -> tuple[str, list]:
    """``update_rows``'s statement up to its WHERE, portable: a CASE per per-row field, ``IN (%s, …)``."""
    meta, ops = model._meta, connection.ops
    pk, params = meta.pk, []
    key = ops.quote_name(pk.column)
    for name, values in per_row.items():
        field = meta.get_field(name)
        column = ops.quote_name(field.column)
        sets.append(f"{column} = CASE {key} {' '.join(['WHEN %s THEN %s'] * len(values))} ELSE {column} END")
        for row_id, value in values.items():
            params += [pk.get_db_prep_value(row_id, connection), field.get_db_prep_save(value, connection)]
    params += [pk.get_db_prep_value(row_id, connection) for row_id in ids]
    where = f"{key} IN ({', '.join(['%s'] * len(ids))})"
    return f"UPDATE {ops.quote_name(meta.db_table)} SET {', '.join(sets)} WHERE {where}", params


def _update_sql_postgresql(model, ids: list, per_row: dict[str, dict], sets: list[str]) -> tuple[str, list]:
    """``update_rows``'s statement up to its WHERE on PostgreSQL: the rows by key, their own values looked up.

    The rows are found by ``= ANY`` of one array of keys (see ``by_keys``), whatever the table's statistics
    say. Each per-row field's values are one JSON object keyed by the row's key in its text form (a UUID's
    ``str``, an integer), read for each row the statement finds (``->>``, a binary search of the object's
    keys, then cast to the column's type; ``->`` for a JSON column). A value missing or None keeps the
    row's value. An ``unnest`` of arrays joined to the rows did the same until the sixth session: the
    planner, estimating one row where the state condition stands, compared every row with every value
    (100 × 100 for a wave, a millisecond of PostgreSQL's CPU per statement). The text is the same for
    any number of rows, so psycopg parses it once (it caches statements of up to 4 KiB and 50 parameters).
    """
    meta, ops = model._meta, connection.ops
    pk = meta.pk
    table, key = ops.quote_name(meta.db_table), ops.quote_name(pk.column)
    params = []
    for name, values in per_row.items():
        field = meta.get_field(name)
        column = ops.quote_name(field.column)
        if isinstance(field, models.JSONField):
            looked_up = f"%s::jsonb -> {table}.{key}::text"
            # Not get_db_prep_save: it wraps the value for psycopg; the object's own encoder writes it.
            by_key = {_key_text(row): value for row, value in values.items() if value is not None}
            params.append(json.dumps(by_key, cls=field.encoder))
        else:
            looked_up = f"(%s::jsonb ->> {table}.{key}::text)::{field.db_type(connection)}"
            prep = _preparer(field)
            by_key = {_key_text(row): prep(value) for row, value in values.items() if value is not None}
            params.append(json.dumps(by_key, default=_as_text, allow_nan=False))
        sets.append(f"{column} = COALESCE({looked_up}, {table}.{column})")
    sql = f"UPDATE {table} SET {', '.join(sets)} WHERE {table}.{key} = ANY(%s::{pk.db_type(connection)}[])"
    return sql, [*params, key_array(ids)]


def _as_text(value: Any) -> str:
    """A per-row value JSON has no type for, as PostgreSQL reads it back with a cast: datetimes, decimals, UUIDs.

    Raises ``TypeError`` for anything else (bytes, say), which would otherwise be stored as its ``repr``.
    """
    if isinstance(value, datetime | date | time_of_day | Decimal | uuid.UUID):
        return str(value)
    raise TypeError(f"a per-row value of type {type(value).__name__} cannot be written through a JSON lookup")


# PostgreSQL's text of a uuid (``id::text``): lower case, hyphenated.
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _key_text(key) -> str:
    """``key`` as PostgreSQL writes it with ``::text``: the JSON objects' keys must be exactly that.

    ``key_array`` lets PostgreSQL read any text of a UUID (upper case, without hyphens), so such a key finds its
    row; its value, looked up under the row's ``id::text``, would not be found and the row keep its old value.
    """
    if isinstance(key, str) and not _CANONICAL_UUID.fullmatch(key):
        return str(uuid.UUID(key))
    return str(key)
