"""Batch acceptance: up to 1,000 send requests stored with set-based SQL (``POST /api/v1/notifications/batch``).

Each request gets the outcome ``accept`` would give it alone (new, duplicate of its original, or
refused with its error) and one refused request never fails the others. The work is set-based:

- reads: the originals of every key (one query, each key looked up by the idempotency index), the
  kinds and the recipients (one each), the policy's facts (``policy.facts_for``: three), each
  distinct (kind, channel, language)'s template version once; the checks of each request then run
  in memory (its Redis rate limits aside);
- writes: one ``INSERT … ON CONFLICT (idempotency_scope, idempotency_key) DO NOTHING RETURNING``
  of every new row with their first StateChange rows (``accept_rows.insert_accepted``: one
  statement on PostgreSQL; on SQLite, the embedded default, chunks of its parameter limit);
- after commit: one ``tasks.enqueue_deliveries`` per tier present (one Redis pipeline each).

A row the INSERT did not return lost a race to a concurrent request with the same key: its
original is read back (one query) and answered as a duplicate, and the rate-limit events its
decision counted are forgotten, exactly as ``accept`` does on its UNIQUE violation. Rows are
inserted in key order so that two batches sharing keys lock them in the same order and cannot
deadlock.
"""

import logging
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from backend.notifications import idempotency, instances, policy, rendering
from backend.notifications.actions.accept import (
    Accepted,
    AcceptError,
    Checked,
    IdempotencyConflict,
    SendRequest,
    build,
    check,
    fold_into_digest,
    known,
    notification_maker,
    scope_of,
)
from backend.notifications.actions.accept_rows import Prepared, insert_accepted
from backend.notifications.array_param import in_array
from backend.notifications.delivery.shared_state import RedisUnavailable
from backend.notifications.models import (
    ApiClient,
    Kind,
    Notification,
    Recipient,
    State,
    StateChange,
    TemplateVersion,
)

logger = logging.getLogger(__name__)

# The most requests one batch may hold (the API answers 400 above it).
MAX_BATCH = 1000

# What ``accept_batch`` gives for each request: its ``Accepted``, or the error ``accept`` would raise.
Outcome = Accepted | AcceptError | IdempotencyConflict | policy.LimitUnavailable


def accept_batch(requests: Sequence[SendRequest], client: ApiClient | None) -> list[Outcome]:
    """Accept ``requests`` as ``accept`` would one by one; their outcomes, in order.

    A key repeated within the batch is one event: its first request is accepted and every later one
    answers as a duplicate of it (or ``IdempotencyConflict`` when its body differs); when the first
    is refused, the next is tried in its place. Raises only what the database raises (503 upstream).

    The repeats of refused requests are checked together (``_refuse_leading``), not one round each:
    a batch of 1,000 refused requests under one key would otherwise run 1,000 rounds of reads.
    """
    outcomes: list[Outcome | None] = [None] * len(requests)
    pending = _accept_round(requests, list(range(len(requests))), client, outcomes)
    while pending:
        pending = _refuse_leading(requests, pending, client, outcomes)
        if pending:
            pending = _accept_round(requests, pending, client, outcomes)
    return outcomes  # type: ignore[return-value]  # every slot is filled once pending is empty


def _refuse_leading(
    requests: Sequence[SendRequest], indexes: list[int], client: ApiClient | None, outcomes: list
) -> list[int]:
    """Refuse, in one pass, each key's leading requests among ``indexes`` that ``accept``'s checks refuse.

    A refused request does not take its key, so one alone would be refused the same way; the first
    of a key that passes the checks, and every request after it, are left for the next round (those
    after it are its duplicates, or conflicts, whatever their own checks say). Returns those left.
    """
    results, _ = _check_all([requests[i] for i in indexes], client)
    passed: set[str] = set()
    left = []
    for i, result in zip(indexes, results, strict=True):
        key = requests[i].idempotency_key
        if key not in passed and isinstance(result, AcceptError):
            outcomes[i] = result
        else:
            passed.add(key)
            left.append(i)
    return left


def _accept_round(
    requests: Sequence[SendRequest], indexes: list[int], client: ApiClient | None, outcomes: list
) -> list[int]:
    """Settle the first request of each key among ``indexes`` (and its repeats); return the indexes left open.

    Left open: the repeats of a key whose first request was refused, for the next round.
    """
    scope = scope_of(client)
    # Every key, not only those the Redis fast path has not seen (as the single send skips the read):
    # a duplicate that Redis forgot (its TTL, a restart) would otherwise meet the policy before the
    # INSERT turns it back into a duplicate, and count against its user's rate limits.
    originals = _originals(scope, {requests[i].idempotency_key for i in indexes})
    firsts: dict[str, int] = {}
    repeats: list[int] = []
    for i in indexes:
        key = requests[i].idempotency_key
        if key in originals:
            outcomes[i] = _as_duplicate(requests[i], originals[key])
        elif key in firsts:
            repeats.append(i)
        else:
            firsts[key] = i
    stored = _store([requests[i] for i in firsts.values()], client)
    for i, outcome in zip(firsts.values(), stored, strict=True):
        outcomes[i] = outcome
    left = []
    for i in repeats:
        first = outcomes[firsts[requests[i].idempotency_key]]
        if isinstance(first, Accepted):
            outcomes[i] = _as_duplicate(requests[i], first.notification, first.history)
        elif isinstance(first, policy.LimitUnavailable):
            outcomes[i] = first  # the limit cannot be checked now: neither can it for a repeat, a moment later
        else:
            left.append(i)
    return left


def _originals(scope: str, keys: set[str]) -> dict[str, Notification]:
    """The stored notifications of ``keys`` in ``scope``, loaded as the single endpoint answers them."""
    if not keys:
        return {}
    found = (
        Notification.objects.select_related("recipient", "kind", "template_version__kind")
        .prefetch_related("state_changes", "attempts")
        .filter(_by_key(scope, keys))
    )
    return {notification.idempotency_key: notification for notification in found}


def _by_key(scope: str, keys: set[str]) -> Q:
    """The rows of ``keys`` in ``scope``, each looked up by both columns of the idempotency index.

    On PostgreSQL a LATERAL lookup per key (``LIMIT 1`` keeps the planner from flattening it into a
    join): with ``key IN (…)``, statistics taken while a client had sent little made the planner read
    every row of the client's scope through the index's first column and hash them, 59 ms for 1,000
    keys among the client's 200,000 rows and growing with its history; 3.5 ms this way.
    """
    if connection.vendor != "postgresql":
        return Q(idempotency_scope=scope, idempotency_key__in=list(keys))
    meta, quote = Notification._meta, connection.ops.quote_name
    pk = quote(meta.pk.column)
    lookup = (
        f"SELECT n.{pk} FROM unnest(%s::text[]) AS k(key) CROSS JOIN LATERAL "
        f"(SELECT {pk} FROM {quote(meta.db_table)} WHERE {quote(meta.get_field('idempotency_scope').column)} = %s "
        f"AND {quote(meta.get_field('idempotency_key').column)} = k.key LIMIT 1) AS n"
    )
    return Q(pk__in=RawSQL(lookup, [list(keys), scope]))


def _as_duplicate(
    request: SendRequest, original: Notification, history: tuple[StateChange, ...] = ()
) -> Accepted | IdempotencyConflict:
    """``request`` answered by ``original``: a duplicate, or a conflict when its body differs.

    ``history`` is the original's when it was accepted earlier in this same batch (not read back).
    """
    if not idempotency.same_request(original.request_hash, request.payload):
        return IdempotencyConflict(
            f"{request.idempotency_key!r} was already used for a different request; use a new key for a new event."
        )
    return Accepted(original, duplicate=True, history=history)


def _store(requests: list[SendRequest], client: ApiClient | None) -> list[Outcome]:
    """Check, decide and insert requests with distinct new keys; their outcomes, in order."""
    checked, now = _prepare_all(requests, client)
    rows = [outcome for outcome in checked if isinstance(outcome, Prepared)]
    with policy.uncounted_on_failure(e for prepared in rows for e in prepared.counted), transaction.atomic():
        changes = insert_accepted(rows, now)
        inserted = set(changes)
        for prepared in rows:
            if prepared.notification.pk in inserted and prepared.digest_at is not None:
                fold_into_digest(prepared.notification, prepared.digest_at)
    # After the block, so that a failing enqueue never counts as a failed write: the rows are committed.
    _enqueue_on_commit([prepared.notification for prepared in rows if prepared.notification.pk in inserted])
    taken = [prepared for prepared in rows if prepared.notification.pk not in inserted]
    policy.forget([event for prepared in taken for event in prepared.counted])
    lost = {prepared.notification.idempotency_key for prepared in taken}
    winners = _originals(scope_of(client), lost) if lost else {}
    keys = [request.idempotency_key for request in requests]
    # Robust: a Redis that refuses the write (a read-only replica) costs the next single send a read, not a 500.
    transaction.on_commit(lambda: idempotency.mark_seen(scope_of(client), keys), robust=True)
    settled = zip(requests, checked, strict=True)
    return [_settled(request, outcome, inserted, changes, winners) for request, outcome in settled]


def _settled(
    request: SendRequest,
    outcome: Prepared | Exception,
    inserted: set[uuid.UUID],
    changes: dict[uuid.UUID, StateChange],
    winners: dict[str, Notification],
) -> Outcome:
    if not isinstance(outcome, Prepared):
        return outcome  # type: ignore[return-value]  # one of Outcome's errors
    notification = outcome.notification
    if notification.pk in inserted:
        return Accepted(notification, duplicate=False, history=(changes[notification.pk],))
    return _as_duplicate(request, winners[request.idempotency_key])


# What ``_check_all`` gives for a request that passes ``accept``'s checks.
_Passed = tuple[Kind, Recipient, policy.Facts, Checked]


def _check_all(requests: list[SendRequest], client: ApiClient | None) -> tuple[list[_Passed | AcceptError], datetime]:
    """``accept``'s checks of each request, with every lookup loaded set-based beforehand; and the instant used.

    Each request gets its kind, recipient, policy facts and ``Checked``, or the ``AcceptError`` refusing it.
    """
    kinds = {kind.name: kind for kind in Kind.objects.filter(name__in={r.kind for r in requests})}
    users = in_array({r.user_id for r in requests}, "text")
    # Not loaded: what acceptance never reads, and which costs the most to load (JSON, two timestamps):
    # 16 → 8 ms of CPU for 1,000 recipients. Read anyway, each would cost a query (test_the_batch_is_set_based).
    loaded = instances.load_all(Recipient.objects.filter(user_id__in=users), ("attributes", "created_at", "updated_at"))
    recipients = {r.user_id: r for r in loaded}
    now = timezone.now()
    found: list[tuple[Kind, Recipient] | AcceptError] = []
    for request in requests:
        try:
            found.append(known(request, kinds.get(request.kind), recipients.get(request.user_id), client))
        except AcceptError as exc:
            found.append(exc)
    facts = policy.facts_for([pair for pair in found if isinstance(pair, tuple)], now)
    version_for = _remembering(rendering.select_version)
    out: list[_Passed | AcceptError] = []
    for request, pair in zip(requests, found, strict=True):
        if isinstance(pair, AcceptError):
            out.append(pair)
            continue
        kind, recipient = pair
        known_facts = facts[recipient.pk, kind.pk]
        try:
            out.append((kind, recipient, known_facts, check(request, kind, recipient, known_facts, version_for, now)))
        except AcceptError as exc:
            out.append(exc)
    return out, now


def _prepare_all(requests: list[SendRequest], client: ApiClient | None) -> tuple[list[Prepared | Exception], datetime]:
    """``accept``'s checks (``_check_all``), policy and row for each request; and the instant they were decided at.

    The policy decides them together (``policy.decide_many``: one Redis pipeline for the rate limits).
    """
    results, now = _check_all(requests, client)
    out: list[Prepared | Exception | None] = [r if isinstance(r, AcceptError) else None for r in results]
    cases: list[tuple[int, policy.Case, Checked]] = []
    for i, result in enumerate(results):
        if isinstance(result, AcceptError):
            continue
        kind, recipient, known_facts, checked = result
        case = policy.Case(kind, recipient, checked.route, checked.priority, requests[i].send_at, known_facts)
        cases.append((i, case, checked))
    decisions = policy.decide_many([case for _, case, _ in cases], now)
    new_notification = notification_maker()
    for (i, case, checked), decision in zip(cases, decisions, strict=True):
        if isinstance(decision, policy.LimitUnavailable):
            out[i] = decision
        else:
            out[i] = build(requests[i], client, case.kind, case.recipient, checked, decision, now, new_notification)
    return out, now  # type: ignore[return-value]  # every slot is filled above


def _remembering(
    select: Callable[[Kind, str, str], TemplateVersion | None],
) -> Callable[[Kind, str, str], TemplateVersion | None]:
    """``select`` asked once per distinct (kind, channel, language) of the batch."""
    chosen: dict[tuple[int, str, str], TemplateVersion | None] = {}

    def version_for(kind: Kind, channel: str, language: str) -> TemplateVersion | None:
        key = (kind.pk, channel, language)
        if key not in chosen:
            chosen[key] = select(kind, channel, language)
        return chosen[key]

    return version_for


def _enqueue_on_commit(rows: list[Notification]) -> None:
    """Hand the queued rows to their tiers once the transaction commits: one ``enqueue_deliveries`` per tier."""
    tiers: dict[str, list[str]] = {}
    for row in rows:
        if row.state == State.QUEUED:
            tiers.setdefault(row.priority, []).append(str(row.pk))
    for tier, ids in tiers.items():
        # Robust: a queue that refuses the write (a read-only replica after a failover) leaves the committed rows
        # queued for the sweeper, as an unreachable one does; it never turns the stored batch into a 500.
        transaction.on_commit(lambda tier=tier, ids=ids: _enqueue_or_leave_for_sweeper(ids, tier), robust=True)


def _enqueue_or_leave_for_sweeper(ids: list[str], tier: str) -> None:
    from backend.notifications.tasks import enqueue_deliveries

    try:
        enqueue_deliveries(ids, tier)
    except RedisUnavailable as exc:
        logger.warning("%d notifications not enqueued (%s): left queued for the sweeper", len(ids), exc)
