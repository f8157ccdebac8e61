"""Retention: notifications that ended long ago are deleted with their history (DESIGN.md §3, 90 days by default).

A notification is deleted once it has ended (sent, delivered, undelivered, failed, suppressed,
expired or cancelled) and nothing changed it for ``NOTIFY_RETENTION_DAYS`` days (``updated_at``):
with it go its state changes, attempts, delivery receipts and dead letter; an in-app message stays
in its reader's inbox, detached from it. A row still queued, scheduled or sending is never deleted,
however old. A campaign's rows go only once its figures are frozen (``campaigns/archive.py``),
which happens when it ended (done or cancelled) more than those days ago with no row left to finish.

The table is walked once per run in slices of its physical order (PostgreSQL's TID range scan over
``PAGES`` heap pages; SQLite's ``rowid``), each slice one short transaction that locks what it
deletes (``FOR UPDATE SKIP LOCKED``: a receipt or a replay writing a row at that moment keeps it for
the next run). A slice reads only its own pages, so a run costs one pass over the table however
much it deletes, and no index (which every insert and state change would pay) is needed to find
old rows. README "Retention" has the figures.

No BRIN range is reset after a delete. A range keeps the lowest value it ever held, so one whose
old rows went and whose space new rows reuse spans from months ago to now. But every window those
indexes serve ends now (the dashboard's, a campaign's pace), and such a window needs a range only
if the range's highest value falls inside it: the old lowest one never makes a range read. (A reset
was tried, measured no faster, and cancelled autovacuum.)

Deleting a row ends what its idempotency key guards: the same key sent again after the purge is a
new notification. Prometheus sees the ``…_total`` counters of ``/metrics`` fall, as a counter reset.
"""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, close_old_connections, connection, models, transaction
from django.utils import timezone

from backend.notifications.models import DeadLetter, Notification, State
from campaigns import archive
from campaigns.fanout import UNFINISHED
from campaigns.models import Campaign

logger = logging.getLogger(__name__)

# States a notification never leaves on its own, what retention may delete: every state but the unfinished ones.
ENDED = tuple(state for state in State if state not in UNFINISHED)
# Heap pages (8 KiB each) per slice on PostgreSQL: 2 MiB, a few thousand rows.
PAGES = 256
# rowids per slice on SQLite.
ROWIDS = 5_000
# Seconds to rest between slices, so a purge never holds a core the delivery engine wants for long.
PAUSE = 0.01
# The longest retention: a hundred years (settings' NOTIFY_RETENTION_DAYS has the same bound).
MAX_DAYS = 36_500


@dataclass
class Purge:
    """What one run did (or, ``dry_run``, would do): rows deleted, campaigns frozen, slices read and those skipped
    (a deadlock rolled them back for the next run), seconds taken."""

    cutoff: datetime
    deleted: int = 0
    frozen_campaigns: list[int] = field(default_factory=list)
    slices: int = 0
    skipped_slices: int = 0
    seconds: float = 0.0


def purge(
    now: datetime | None = None, days: int | None = None, *, dry_run: bool = False, pause: float = PAUSE
) -> Purge | None:
    """Delete what ended more than ``days`` (default ``NOTIFY_RETENTION_DAYS``) before ``now``; None when days is 0.

    ``dry_run`` counts what a run would delete and which campaigns it would freeze, and changes nothing.
    ``pause``: seconds between two slices. Raises ``ValueError`` for days above ``MAX_DAYS``, and what
    the database raises (a run stopped half-way resumes from the start next time: each slice is
    committed on its own).
    """
    days = settings.NOTIFY["RETENTION_DAYS"] if days is None else days
    if days <= 0:
        return None
    if days > MAX_DAYS:
        raise ValueError(f"retention of {days} days: at most {MAX_DAYS}")
    started = time.monotonic()
    now = now or timezone.now()
    report = Purge(cutoff=now - timedelta(days=days))
    if dry_run:
        report.frozen_campaigns = archive.freezable(report.cutoff)
    else:
        report.frozen_campaigns = archive.freeze_finished(report.cutoff, now)
    for bounds in _slices():
        report.slices += 1
        try:
            with transaction.atomic():
                ids = _ids(bounds, report.cutoff, report.frozen_campaigns if dry_run else [], lock=not dry_run)
                if ids and not dry_run:
                    ids = _without_held_dead_letters(ids)
                    delete_notifications(ids)
        except OperationalError as exc:
            if not _lock_conflict(exc):
                raise
            # A deadlock with another scheduler's run, say: this slice waits for the next run, the others go on.
            logger.warning("retention slice %s..%s skipped: %s", *bounds, exc)
            report.skipped_slices += 1
            continue
        report.deleted += len(ids)
        if pause:
            time.sleep(pause)
    report.seconds = time.monotonic() - started
    return report


def _lock_conflict(exc: OperationalError) -> bool:
    """Whether ``exc`` is a lock conflict (a deadlock; SQLite's busy database) rather than a fault to report."""
    from psycopg import errors

    cause = exc.__cause__
    if isinstance(cause, errors.DeadlockDetected | errors.LockNotAvailable):
        return True
    return connection.vendor == "sqlite" and "database is locked" in str(exc)


def _slices() -> Iterator[tuple[object, object]]:
    """Bounds [low, high) of each slice of the notifications table as it is now (rows added later are new)."""
    table = Notification._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_relation_size(%s) / current_setting('block_size')::int", [table])
            pages = cursor.fetchone()[0]
            for low in range(0, pages, PAGES):
                yield f"({low},0)", f"({low + PAGES},0)"
            return
        cursor.execute(f"SELECT coalesce(max(rowid), 0) FROM {table}")
        last = cursor.fetchone()[0]
    for low in range(0, last + 1, ROWIDS):
        yield low, low + ROWIDS


def _ids(bounds: tuple[object, object], cutoff: datetime, also_campaigns: list[int], lock: bool) -> list:
    """Ids of the rows of slice ``bounds`` that retention deletes; ``also_campaigns``: treat those as frozen."""
    table, campaigns = Notification._meta.db_table, Campaign._meta.db_table
    if connection.vendor == "postgresql":
        where, tail = "n.ctid >= %s::tid AND n.ctid < %s::tid", " FOR UPDATE OF n SKIP LOCKED" if lock else ""
    else:
        where, tail = "n.rowid >= %s AND n.rowid < %s", ""
    ended = ", ".join(["%s"] * len(ENDED))
    extra = f" OR n.campaign_id IN ({', '.join(['%s'] * len(also_campaigns))})" if also_campaigns else ""
    # A row folded into a digest that has not ended yet stays: the digest's mail still reads it (its
    # kinds' unsubscribe links, email_footer.marketing_kinds).
    sql = (
        f"SELECT n.id FROM {table} n WHERE {where} AND n.updated_at < %s AND n.state IN ({ended})"
        f" AND (n.campaign_id IS NULL OR n.campaign_id IN (SELECT c.id FROM {campaigns} c"
        f" WHERE c.archived_at IS NOT NULL){extra})"
        f" AND NOT EXISTS (SELECT 1 FROM {table} g WHERE g.id = n.digest_id AND g.state NOT IN ({ended})){tail}"
    )
    with connection.cursor() as cursor:
        cutoff_value = connection.ops.adapt_datetimefield_value(cutoff)
        cursor.execute(sql, [*bounds, cutoff_value, *ENDED, *also_campaigns, *ENDED])
        return [row[0] for row in cursor.fetchall()]


def _without_held_dead_letters(ids: list) -> list:
    """``ids`` less those whose dead letter another transaction holds; PostgreSQL (SQLite has no row locks).

    A replay locks the dead letter and then its notification, the opposite order of a slice, which has
    locked the notifications: taking the dead letters with SKIP LOCKED leaves those rows to the next
    run instead of a deadlock.
    """
    if connection.vendor != "postgresql":
        return ids
    table = DeadLetter._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, notification_id FROM {table} WHERE notification_id = ANY(%s)", [ids])
        letters = cursor.fetchall()
        if not letters:
            return ids
        cursor.execute(f"SELECT id FROM {table} WHERE id = ANY(%s) FOR UPDATE SKIP LOCKED", [[pk for pk, _ in letters]])
        free = {pk for (pk,) in cursor.fetchall()}
    held = {notification for pk, notification in letters if pk not in free}
    return [pk for pk in ids if pk not in held]


def relations() -> list[tuple[str, str, str]]:
    """What refers to a notification, as (table, column, "delete" or "set null"), from the models' ``on_delete``.

    Raises ``ImproperlyConfigured`` for a relation ``delete_notifications`` cannot follow in one statement: another
    ``on_delete`` (PROTECT would have to refuse), or a deleted table that others refer to in turn.
    """
    found = []
    for rel in _referring(Notification):
        table, column = rel.related_model._meta.db_table, rel.field.column
        if rel.on_delete is models.SET_NULL:
            found.append((table, column, "set null"))
        elif rel.on_delete is models.CASCADE and not _referring(rel.related_model):
            found.append((table, column, "delete"))
        else:
            raise ImproperlyConfigured(f"retention cannot delete notifications that {table}.{column} refers to")
    return found


def _referring(model: type[models.Model]) -> list:
    """The relations that point at ``model``, hidden ones too (``related_name="+"``, such as the support
    explorer's reveal audit): the database checks every foreign key, whether Django names it or not."""
    return [field for field in model._meta.get_fields(include_hidden=True) if field.auto_created and not field.concrete]


def delete_notifications(ids: list) -> None:
    """Delete notifications ``ids`` and what refers to them: one statement a table, no model objects.

    Django's ``delete()`` loads every row as a model object first: 2.5 times the time (README "Retention").
    """
    table = Notification._meta.db_table
    # As the database stores them: a UUID for PostgreSQL, 32 hex digits for SQLite (which binds no UUID object).
    ids = [Notification._meta.pk.get_db_prep_value(pk, connection) for pk in ids]
    if connection.vendor == "postgresql":
        chunks, match = [ids], "= ANY(%s)"
    else:
        size = connection.features.max_query_params
        chunks, match = [ids[n : n + size] for n in range(0, len(ids), size)], ""
    referring = relations()
    with connection.cursor() as cursor:
        for chunk in chunks:
            where = match or f"IN ({', '.join(['%s'] * len(chunk))})"
            params = [chunk] if match else chunk
            for other, column, action in referring:
                change = f"DELETE FROM {other}" if action == "delete" else f"UPDATE {other} SET {column} = NULL"
                cursor.execute(f"{change} WHERE {column} {where}", params)
            cursor.execute(f"DELETE FROM {table} WHERE id {where}", params)


def run_forever(interval: float | None = None) -> None:
    """Purge every ``interval`` seconds (default ``NOTIFY_RETENTION_INTERVAL``), first at once: the scheduler's thread.

    A failed run (the database restarting) is logged and tried again at the next interval.
    """
    interval = settings.NOTIFY["RETENTION_INTERVAL"] if interval is None else interval
    if settings.NOTIFY["RETENTION_DAYS"] == 0:
        logger.info("retention off (NOTIFY_RETENTION_DAYS=0): every notification is kept")
        return
    while True:
        try:
            report = purge()
        except Exception:
            logger.exception("retention run failed")
        else:
            if report is not None:
                logger.info(
                    "retention: %d notifications deleted, campaigns frozen %s, %d slices (%d skipped) in %.1f s"
                    " (ended before %s)", report.deleted, report.frozen_campaigns, report.slices,
                    report.skipped_slices, report.seconds, report.cutoff.isoformat(),
                )  # fmt: skip
        finally:
            close_old_connections()
        time.sleep(interval)
