"""How accepted notifications are written: the rows and their first history row, skipping keys already taken.

One function, ``insert_accepted``, for the single send and the batch. On PostgreSQL it is one
statement, atomic on its own, so a single send pays one round trip instead of four (BEGIN, two
INSERTs, COMMIT):

    WITH new AS (INSERT INTO notification … SELECT * FROM unnest(<one array per column>)
                 ON CONFLICT (idempotency_scope, idempotency_key) DO NOTHING RETURNING id, state)
    INSERT INTO statechange (notification_id, from_state, to_state, reason, at)
    SELECT new.id, '', new.state, … FROM new JOIN unnest(<ids>, <reasons>) … RETURNING …

The columns arrive as arrays, one parameter each: a VALUES list of 1,000 rows would bind 29,000
parameters that the driver parses one by one. SQLite (the embedded default, ≥ 3.35) has no
INSERT inside WITH: there the rows go as VALUES lists in chunks of its bound-parameter limit, then
their history rows by one INSERT, in one transaction.

Rows are inserted in key order so that two batches sharing keys lock them in the same order and
cannot deadlock. A row not inserted lost a race to a concurrent request with the same key, or its
key was taken before: the caller reads the original.
"""

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from operator import attrgetter

from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import DateField, DateTimeField, Field, JSONField

from backend.notifications import instances, metric_counters, rate_limits
from backend.notifications.models import Notification, StateChange
from backend.notifications.prepared import prepared_cursor


@dataclass(frozen=True)
class Prepared:
    """A send request checked and decided, not yet stored: the unsaved row and what goes with it.

    ``history_reason`` is the reason of its first StateChange; ``digest_at`` is set when it folds into a digest;
    ``counted`` are the rate-limit events its decision counted (``policy.forget`` them if it is not inserted).
    """

    notification: Notification
    history_reason: str
    digest_at: datetime | None
    counted: tuple[rate_limits.Event, ...] = ()


def insert_accepted(rows: list[Prepared], now: datetime) -> dict[uuid.UUID, StateChange]:
    """Insert each row with its first StateChange unless its key is taken; the StateChanges by notification id.

    ``now`` is the instant the rows were accepted at, the ``now`` that ``build`` stamped their
    ``queued_at`` with: their ``created_at`` and ``updated_at`` and their first history row take it
    too, so that no row reads queued before it was created. The ids missing from the answer were not
    inserted. Inserted notifications become saved model instances (``_state.adding`` False).
    """
    if not rows:
        return {}
    rows = sorted(rows, key=lambda prepared: prepared.notification.idempotency_key)
    _, stamped, _ = _row_reader()
    for prepared in rows:  # what the auto_now / auto_now_add fields' pre_save would do, with the one instant
        for attname in stamped:
            setattr(prepared.notification, attname, now)
    if connection.vendor == "postgresql":
        changes = _insert_postgresql(rows, now)
    else:
        with transaction.atomic():
            changes = _insert_in_chunks(rows, now)
    made = []
    for prepared in rows:
        notification = prepared.notification
        if notification.pk in changes:
            notification._state.adding, notification._state.db = False, connection.alias
            made.append((notification.priority, "", notification.state, ""))
    metric_counters.add_changes(made)
    return changes


def _columns() -> tuple[list[Field], str, str]:
    """The notification's fields, ``INSERT INTO table (columns)`` and the ``ON CONFLICT … RETURNING`` clause."""
    meta = Notification._meta
    fields = list(meta.concrete_fields)
    quote = connection.ops.quote_name
    insert = f"INSERT INTO {quote(meta.db_table)} ({', '.join(quote(field.column) for field in fields)})"
    conflict = (
        f"ON CONFLICT ({quote(meta.get_field('idempotency_scope').column)}, "
        f"{quote(meta.get_field('idempotency_key').column)}) DO NOTHING"
    )
    return fields, insert, conflict


def _with_history(rows: str, history: str) -> str:
    """``WITH new AS (INSERT … rows ON CONFLICT DO NOTHING RETURNING id, state) INSERT INTO statechange … history``.

    ``rows`` gives the notification's columns in ``_columns`` order; ``history`` selects, from ``new``,
    each StateChange's notification id, from state, to state, reason and time.
    """
    _, insert, conflict = _columns()
    return (
        f"WITH new AS ({insert} {rows} {conflict} RETURNING id, state) "
        f"INSERT INTO {connection.ops.quote_name(StateChange._meta.db_table)} "
        f"(notification_id, from_state, to_state, reason, at) {history} RETURNING id, notification_id"
    )


@cache
def _insert_postgresql_sql() -> str:
    """The one statement of ``_insert_postgresql`` (built once: the column types cost a third of a ms a send)."""
    casts = ", ".join(f"%b::{field.db_type(connection)}[]" for field in _columns()[0])
    return _with_history(
        f"SELECT * FROM unnest({casts})",
        "SELECT new.id, '', new.state, r.reason, %b FROM new JOIN unnest(%b::uuid[], %b::varchar[]) AS r(id, reason) "
        "ON r.id = new.id",
    )


@cache
def _insert_one_sql() -> str:
    """``_insert_postgresql_sql`` for one row (a single send): a parameter per column instead of an array."""
    values = ", ".join(f"%s::{field.db_type(connection)}" for field in _columns()[0])
    return _with_history(f"VALUES ({values})", "SELECT new.id, '', new.state, %s, %s FROM new")


def _statement(rows: list[Prepared], now: datetime) -> tuple[str, list]:
    """The insert of ``rows`` and its parameters: arrays for a batch, one value per column for a single send.

    psycopg packs each array parameter in Python (about a tenth of a single send's CPU went to its
    26 arrays of one value); for a batch, arrays keep the parameter count at 29 whatever its size.
    The ``auto_now`` / ``auto_now_add`` fields (created, updated) carry ``now`` already
    (``insert_accepted`` stamps them); every other field's ``pre_save`` reads the attribute, so a row's
    values are read in one ``attrgetter`` call instead of one ``pre_save`` per field.
    """
    values, _, json_columns = _row_reader()
    columns = [list(column) for column in zip(*(values(prepared.notification) for prepared in rows), strict=True)]
    for index, encoder in json_columns:
        columns[index] = [None if value is None else json.dumps(value, cls=encoder) for value in columns[index]]
    if len(rows) == 1:
        return _insert_one_sql(), [column[0] for column in columns] + [rows[0].history_reason, now]
    ids = [prepared.notification.pk for prepared in rows]
    return _insert_postgresql_sql(), [*columns, now, ids, [prepared.history_reason for prepared in rows]]


@cache
def _row_reader() -> tuple[Callable[[Notification], tuple], tuple[str, ...], tuple[tuple[int, type | None], ...]]:
    """How ``_statement`` reads a row: its column values in ``_columns`` order, the fields it stamps, its JSON columns.

    Every concrete field is either stamped (``auto_now`` / ``auto_now_add``) or one whose
    ``pre_save`` returns the attribute as it is; ``ImproperlyConfigured`` names one that is neither
    (its own ``pre_save`` would be skipped).
    """
    fields = Notification._meta.concrete_fields
    stamped = tuple(f.attname for f in fields if type(f).pre_save is DateTimeField.pre_save and _auto(f))
    for field in fields:
        if field.attname not in stamped and not _pre_save_reads_attribute(field):
            raise ImproperlyConfigured(f"{field!r} has its own pre_save: accept_rows cannot read it as an attribute")
    json_columns = tuple((i, f.encoder) for i, f in enumerate(fields) if isinstance(f, JSONField))
    return attrgetter(*(field.attname for field in fields)), stamped, json_columns


def _auto(field: Field) -> bool:
    return bool(getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False))


def _pre_save_reads_attribute(field: Field) -> bool:
    """Whether ``field.pre_save(instance, add=True)`` is ``getattr(instance, field.attname)`` (Django 5.2's fields)."""
    if type(field).pre_save in (DateField.pre_save, DateTimeField.pre_save):
        return not _auto(field)
    return type(field).pre_save is Field.pre_save


def _insert_postgresql(rows: list[Prepared], now: datetime) -> dict[uuid.UUID, StateChange]:
    sql, params = _statement(rows, now)
    # Prepared: each of the two texts is planned once per connection (prepared.py).
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        returned = cursor.fetchall()
    by_id = {prepared.notification.pk: prepared for prepared in rows}
    new_change = instances.maker(StateChange, ("id", "notification", "from_state", "to_state", "reason", "at"))
    changes = {}
    for change_id, notification_id in returned:
        prepared = by_id[notification_id]
        changes[notification_id] = new_change(
            id=change_id,
            notification=prepared.notification,
            from_state="",
            to_state=prepared.notification.state,
            reason=prepared.history_reason,
            at=now,
        )
    return changes


def _insert_in_chunks(rows: list[Prepared], now: datetime) -> dict[uuid.UUID, StateChange]:
    """SQLite: the rows as VALUES lists, as many per statement as its parameter limit allows, then their history."""
    fields, insert, conflict = _columns()
    _, stamped, _ = _row_reader()
    placeholder = "(" + ", ".join(["%s"] * len(fields)) + ")"
    size = connection.ops.bulk_batch_size(fields, rows)
    inserted: set[uuid.UUID] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), size):
            chunk = rows[start : start + size]
            # The stamped fields' pre_save would take a time of its own: they carry ``now`` (insert_accepted).
            params = [
                field.get_db_prep_save(
                    getattr(prepared.notification, field.attname)
                    if field.attname in stamped
                    else field.pre_save(prepared.notification, add=True),
                    connection=connection,
                )
                for prepared in chunk
                for field in fields
            ]
            cursor.execute(
                f"{insert} VALUES {', '.join([placeholder] * len(chunk))} {conflict} "
                f"RETURNING {connection.ops.quote_name(Notification._meta.pk.column)}",
                params,
            )
            inserted.update(uuid.UUID(str(value)) for (value,) in cursor.fetchall())
    changes = StateChange.objects.bulk_create(
        StateChange(notification=p.notification, from_state="", to_state=p.notification.state, reason=p.history_reason)
        for p in rows
        if p.notification.pk in inserted
    )
    # ``at`` is auto_now_add: bulk_create stamps a time of its own, put back to the rows' ``now``.
    StateChange.objects.filter(pk__in=[change.pk for change in changes]).update(at=now)
    for change in changes:
        change.at = now
    return {change.notification_id: change for change in changes}
