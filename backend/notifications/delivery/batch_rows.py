"""A batch's read: its notifications still queued, each with its recipient, kind and template version.

One SELECT by primary key (``by_keys``) of the columns a batch reads, then one query each for the
distinct kinds and template versions. The rows become model instances without ``Model.__init__``
(``loader``): Django's own iterator set each of a row's ~40 values through the field's descriptor,
then did the same for its recipient, 58–70 µs of CPU a row on a slow host, where the values
themselves, converted by the same compiler, took 21–30 µs (README, "Delivery in batches").
"""

from collections.abc import Sequence

from django.db import connection, models
from django.db.models import BooleanField, Q
from django.db.models.expressions import RawSQL

from backend.notifications.array_param import key_array
from backend.notifications.instances import loader
from backend.notifications.models import Notification, Recipient, State

# Columns a batch never reads from the rows it loads (the single path reads its row whole): seven of them timestamps,
# each parsed per row for nothing (the read's CPU fell by a twentieth). Written ones are set by UPDATE, not by save().
UNREAD = (
    "idempotency_key", "idempotency_scope", "request_hash", "reason", "preview", "provider", "provider_ref",
    "last_error", "updated_at", "queued_at", "sending_at", "lease_until", "sent_at", "failed_at", "expired_at",
)  # fmt: skip

# The recipient's columns a batch never reads (it sends to the address and names the user id): its attributes' JSON,
# five timestamps and times parsed per row, 24.6 → 19.1 µs of CPU a row read (in process, 200-row reads).
UNREAD_RECIPIENT = (
    "attributes", "created_at", "updated_at", "quiet_hours_start", "quiet_hours_end", "email_bounced_at",
    "email_bounce", "phone_disabled_at", "phone_disabled_reason", "language", "time_zone",
)  # fmt: skip


def _read(model: type[models.Model], unread: Sequence[str]) -> list[str]:
    """The attnames of ``model``'s concrete fields but ``unread``, in the model's order."""
    return [field.attname for field in model._meta.concrete_fields if field.name not in unread]


def queued(ids: list[str]) -> list[Notification]:
    """The notifications ``ids`` still queued (any order), their recipient, kind and template version attached.

    A column in ``UNREAD`` or ``UNREAD_RECIPIENT`` is deferred: reading it costs a query, as for any
    deferred field. Ids not found or no longer queued are left out.
    """
    columns, recipient_columns = _read(Notification, UNREAD), _read(Recipient, UNREAD_RECIPIENT)
    # By primary key alone, the state checked here: with ``state='queued'`` in the statement, statistics taken
    # before a backlog arrived (10 queued rows estimated) made PostgreSQL read the whole queue through its partial
    # index and hash it to find the batch's 200 rows (60,000 queued: 26–99 ms a batch, growing with the queue).
    found = Notification.objects.filter(by_keys(ids)).order_by()
    found = found.values_list(*columns, *(f"recipient__{name}" for name in recipient_columns))
    recipient_field, state = Notification._meta.get_field("recipient"), columns.index("state")
    notification_of = loader(Notification, columns, found.db)
    recipient_of = loader(Recipient, recipient_columns, found.db)
    rows = []
    for values in found:
        if values[state] != State.QUEUED:
            continue
        notification = notification_of(values[: len(columns)])
        recipient_field.set_cached_value(notification, recipient_of(values[len(columns) :]))
        rows.append(notification)
    attach_shared(rows, ("kind", "template_version"))
    return rows


def attach_shared(rows: list[Notification], names: tuple[str, ...]) -> None:
    """Give ``rows`` their related ``names`` (foreign keys), one instance per distinct row read in one query each.

    A batch's rows share a few kinds and template versions: joined, each row built its own
    instances of both (with their timestamps parsed), about a tenth of a batch's CPU. Unordered:
    a template version's default ordering joined its kind to sort by the kind's name.
    """
    for name in names:
        field = Notification._meta.get_field(name)
        keys = {getattr(row, field.attname) for row in rows} - {None}
        related = field.related_model.objects.order_by().in_bulk(keys) if keys else {}
        for row in rows:
            key = getattr(row, field.attname)
            if key is not None:
                field.set_cached_value(row, related[key])


def by_keys(ids: list[str]) -> Q | RawSQL:
    """The filter of the notifications ``ids``: on PostgreSQL ``id = ANY(%s::uuid[])``, one array parameter.

    ``IN (%s, …)`` of a whole batch is a statement psycopg parses again each time (it caches those of
    at most 50 parameters). ``= ANY`` of an array, unlike ``IN (SELECT unnest(…))``, gives the planner
    the number of keys, so it reads them from the primary key whatever it believes of the table's
    size: with statistics taken when the table was nearly empty it hashed a seq scan of every row.
    """
    if connection.vendor != "postgresql":
        return Q(pk__in=ids)
    meta, quote = Notification._meta, connection.ops.quote_name
    table, key = quote(meta.db_table), quote(meta.pk.column)
    return RawSQL(f"{table}.{key} = ANY(%s::uuid[])", [key_array(ids)], output_field=BooleanField())
