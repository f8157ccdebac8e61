"""Set-based moves of a campaign's notifications to another state, each row with its history row.

The one mechanism behind a wave's release (``fanout.release_due``), an end time
(``fanout.end_due``) and a cancel (``ledger.stop_unsent``): PostgreSQL moves the rows and writes
their history in one statement; SQLite (one writer at a time) writes the history first, then moves
the same rows, in one transaction. A row that left the state it is moved from meanwhile — a
worker's claim (``queued`` → ``sending``) committed first — is left as it is: PostgreSQL re-reads
a row it waited for and re-checks its state, so nothing a worker holds is taken from it, and a
claim that comes after finds the row moved and hands nothing over.
"""

from datetime import datetime
from typing import Any

from django.db import connection, transaction

from backend.notifications import metric_counters
from backend.notifications.models import Notification, Priority, State, StateChange

# Not yet handed to a provider: what a cancel stops and an end time expires (``sending`` ones are in flight).
UNSENT = (State.QUEUED, State.SCHEDULED)


def any_in(campaign_id: int, states: tuple[str, ...]) -> bool:
    """Whether a row of ``campaign_id`` is in one of ``states`` (two or more): one probe of the (campaign, state) index.

    Ordered by the index's state column, so that no other plan can skip a sort: unordered (``EXISTS``,
    ``LIMIT 1``), PostgreSQL took a sequential scan wherever the campaign was a large share of the
    table, expecting such a row at once, and read every row before the campaign's, at each tick
    (tests/test_campaign_feed_plans.py). One state alone would be ``=``, and ordering by it free.
    """
    found = Notification.objects.filter(campaign_id=campaign_id, state__in=states).order_by("state")
    return found.values_list("pk", flat=True).first() is not None


def move_with_history(
    rows_sql: str,
    rows_params: list,
    set_sql: str,
    set_params: list,
    from_state: str,
    to_state: str,
    reason: str,
    at: Any,
) -> int:
    """``UPDATE … SET set_sql`` the rows of ``rows_sql`` still in ``from_state``, with a history row each; how many.

    ``rows_sql`` selects notification ids (a campaign's: the standard tier's, as /metrics counts
    them); ``at`` is the history rows' instant as the database takes it
    (``connection.ops.adapt_datetimefield_value``).
    """
    notification, history = Notification._meta.db_table, StateChange._meta.db_table
    into = f"INSERT INTO {history} (notification_id, from_state, to_state, reason, at)"
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The ids as one array and the state concatenated, as the batch delivery's moves do: with
            # ``state = %s AND id IN (…)`` PostgreSQL hashed the chosen ids against every row in that state
            # (a seq scan of the table to cancel 10,000 rows of a campaign among 60,000 scheduled ones),
            # and no index on the state can serve this condition whatever the statistics say.
            cursor.execute(
                f"WITH moved AS (UPDATE {notification} SET {set_sql} WHERE (state || '') = %s"
                f" AND id = ANY(ARRAY({rows_sql})) RETURNING id) {into} SELECT id, %s, %s, %s, %s FROM moved",
                [*set_params, from_state, *rows_params, from_state, to_state, reason, at],
            )
            moved = cursor.rowcount
        else:
            chosen = f"SELECT m.id FROM {notification} m WHERE m.state = %s AND m.id IN ({rows_sql})"
            cursor.execute(f"{into} SELECT id, %s, %s, %s, %s FROM ({chosen}) c", [
                from_state, to_state, reason, at, from_state, *rows_params,
            ])  # fmt: skip
            moved = cursor.rowcount
            cursor.execute(f"UPDATE {notification} SET {set_sql} WHERE id IN ({chosen})", [
                *set_params, from_state, *rows_params,
            ])  # fmt: skip
        metric_counters.add(metric_counters.entered(Priority.STANDARD, from_state, to_state, moved))
    return moved


def stop_unsent(
    campaign_id: int,
    to_state: str,
    reason: str,
    at: datetime,
    *,
    fed_only: bool = False,
    limit: int | None = None,
    stamp: str = "",
) -> int:
    """Move ``campaign_id``'s rows not yet handed to a provider to ``to_state`` with ``reason``; how many.

    ``fed_only``: only the rows whose task is already in Redis (``queued`` with ``queued_at`` set,
    at most ``NOTIFY_CAMPAIGN_FEED``, and retries waiting for their delay): the only rows a worker
    could claim. ``limit``: at most that many rows in all. ``stamp``: a column set to ``at`` too
    (``expired_at``). One statement per state moved from (``scheduled``, then ``queued``), so
    that each history row names the state it left.
    """
    notification, postgresql = Notification._meta.db_table, connection.vendor == "postgresql"
    moment = connection.ops.adapt_datetimefield_value(at)
    set_sql = "state = %s, reason = %s, updated_at = %s" + (f", {stamp} = %s" if stamp else "")
    set_params = [to_state, reason, moment] + ([moment] if stamp else [])
    moved = 0
    # Under a LIMIT, PostgreSQL costs a sequential scan as if the campaign's rows were spread evenly
    # through the table, and they lie together where they were inserted: it read every row before
    # them for each chunk. Ordered by the (campaign, state) index's second column, only that index
    # gives the order without a sort; the state as a one-element array, since "ORDER BY" a column
    # fixed by "=" is free in any plan.
    in_state, ordered = ("d.state = %s", "")
    if postgresql:
        in_state, ordered = "d.state = ANY(ARRAY[%s]::text[])", " ORDER BY d.state"
    for from_state in (State.QUEUED,) if fed_only else (State.SCHEDULED, State.QUEUED):
        if limit is not None and moved >= limit:
            break
        rows = f"SELECT d.id FROM {notification} d WHERE d.campaign_id = %s AND {in_state}"
        rows_params: list[Any] = [campaign_id, from_state]
        if fed_only:
            rows += " AND d.queued_at IS NOT NULL"
        if limit is not None:
            rows, rows_params = f"{rows}{ordered} LIMIT %s", [*rows_params, limit - moved]
        moved += move_with_history(rows, rows_params, set_sql, set_params, from_state, to_state, reason, moment)
    return moved
