"""Tables large enough for PostgreSQL's plans to matter, built from one notification row; the plans read back."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection

from backend.notifications.models import Notification


def copies_of(row: Notification, count: int, prefix: str, **fields) -> list[Notification]:
    """``count`` unsaved copies of ``row``, new ids, idempotency keys ``prefix-0`` …, with ``fields`` set on each."""
    values = {field.attname: getattr(row, field.attname) for field in Notification._meta.concrete_fields}
    return [
        Notification(**{**values, "id": uuid.uuid4(), "idempotency_key": f"{prefix}-{n}", **fields})
        for n in range(count)
    ]


def analyze() -> None:
    """Fresh statistics of the notification table, as autovacuum would take them."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Notification._meta.db_table}")


def plan_of(sql: str) -> str:
    """The plan PostgreSQL picks for ``sql`` (a statement as the query log holds it, values inline), as text."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}")
        return "\n".join(line for (line,) in cursor.fetchall())


def copies_in_sql(
    row: Notification, count: int, prefix: str | None = None, recipients: list[int] | None = None, **fields
) -> None:
    """``count`` copies of ``row`` inserted by one INSERT … SELECT: new ids, ``fields`` set, otherwise as stored.

    Their keys are ``prefix-0`` …, or without a prefix the row's stored key with ``-0`` … appended. Copy
    ``n`` is for ``recipients[n % len(recipients)]`` when they are given, else for ``row``'s recipient.
    Built as Python objects (``copies_of``), 40,000 such rows took a test 12 s.
    """
    meta = Notification._meta
    overrides = {meta.get_field(name).column: value for name, value in fields.items()}
    select, params = [], []
    for column in (field.column for field in meta.concrete_fields):
        if column == "id":
            select.append("gen_random_uuid()")
        elif column == "idempotency_key" and prefix is not None:
            select.append("%s || g")
            params.append(f"{prefix}-")
        elif column == "idempotency_key":
            select.append("idempotency_key || '-' || g")
        elif column == "recipient_id" and recipients:
            select.append("(%s::bigint[])[g %% %s + 1]")
            params += [recipients, len(recipients)]
        elif column in overrides:
            select.append("%s")
            params.append(overrides[column])
        else:
            select.append(column)
    columns = ", ".join(field.column for field in meta.concrete_fields)
    with connection.cursor() as cursor, _foreign_keys_unqueued(cursor):
        cursor.execute(
            f"INSERT INTO {meta.db_table} ({columns}) SELECT {', '.join(select)}"
            f" FROM {meta.db_table}, generate_series(0, %s) g WHERE id = %s",
            [*params, count - 1, row.pk],
        )


@contextmanager
def _foreign_keys_unqueued(cursor) -> Iterator[None]:
    """Inserts whose foreign keys PostgreSQL does not queue for checking, when the test role may ask for it.

    The keys are deferred, so each copied row queued six checks that ran when the test ended (Django's
    ``TestCase`` checks deferred constraints at teardown): 4–8 s for 40,000 copies. A copy repeats
    the keys of a stored row, whose own were checked: only the plans are under test.
    """
    cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    superuser = cursor.fetchone()[0]
    if superuser:
        cursor.execute("SET LOCAL session_replication_role = replica")
    try:
        yield
    finally:
        if superuser:
            cursor.execute("SET LOCAL session_replication_role = origin")
