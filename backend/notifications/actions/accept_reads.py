"""What a single send reads before it decides, in one statement on PostgreSQL.

A send needs its kind, its recipient, the recipient's choices for the kind, whether the recipient
has an active push device, the campaign notifications that count against the rate limits, and the
newest approved template versions. Through the ORM that was five queries, and each cost about a
millisecond of Python (compiling the query, building the objects) beside its round trip: most of
a send's CPU (README "Throughput: the send API"). Here it is one hand-written statement

    WITH base AS MATERIALIZED (SELECT kind, recipient, their choices, device, campaign events
                               FROM kind LEFT JOIN recipient WHERE kind.name = … )
    SELECT base, version FROM base LEFT JOIN LATERAL (newest approved version per channel and
                                                       language, in the two languages) …

one row per template version (at least one row when the kind exists), whose values become the same
model instances, ``policy.Facts`` and version choice that the five queries gave: ``accept`` then runs
the same checks on them (``check`` and ``policy.decide`` take ``facts`` and ``version_for``, as the
batch endpoint's set-based loading does). SQLite (the embedded default) keeps the ORM queries.
"""

from collections.abc import Callable
from datetime import datetime
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import Model

from backend.notifications import policy, rendering
from backend.notifications.models import (
    Device,
    Kind,
    Notification,
    Preference,
    Priority,
    Recipient,
    State,
    TemplateVersion,
)
from backend.notifications.prepared import prepared_cursor

VersionFor = Callable[[Kind, str, str], TemplateVersion | None]
_MODELS = (Kind, Recipient, TemplateVersion)
# Seconds subtracted from the campaign events' lower bound in SQL: the exact bound is applied in
# Python (``policy._rate_plan`` keeps events after it), so SQL only has to return a superset.
_SLACK_SECONDS = 1


def _position(meta, name: str) -> int:
    """Where field ``name`` is among the model's concrete fields (its column's alias in the statement)."""
    return list(meta.concrete_fields).index(meta.get_field(name))


@cache
def _statement() -> str:
    """The statement's text (built once from the models' tables and columns)."""
    q = connection.ops.quote_name
    kind, recipient, version = (model._meta for model in _MODELS)

    def columns(meta, alias: str, prefix: str) -> str:
        return ", ".join(f"{alias}.{q(f.column)} AS {prefix}{i}" for i, f in enumerate(meta.concrete_fields))

    def col(meta, name: str) -> str:
        return q(meta.get_field(name).column)

    preference, device, n = Preference._meta, Device._meta, Notification._meta
    choices = (
        f"FROM {q(preference.db_table)} p WHERE p.{col(preference, 'recipient')} = r.{col(recipient, 'id')} "
        f"AND p.{col(preference, 'kind')} = k.{col(kind, 'id')} ORDER BY p.{col(preference, 'channel')}"
    )
    kind_id = f"base.k{_position(kind, 'id')}"
    language = f"base.r{_position(recipient, 'language')}"
    default_language = f"base.k{_position(kind, 'default_language')}"
    return (
        "WITH base AS MATERIALIZED (SELECT "
        f"{columns(kind, 'k', 'k')}, {columns(recipient, 'r', 'r')}, "
        f"ARRAY(SELECT p.{col(preference, 'channel')} {choices}) AS chosen_channels, "
        f"ARRAY(SELECT p.{col(preference, 'enabled')} {choices}) AS chosen_enabled, "
        f"EXISTS(SELECT 1 FROM {q(device.db_table)} d WHERE d.{col(device, 'recipient')} = r.{col(recipient, 'id')} "
        f"AND d.{col(device, 'disabled_at')} IS NULL) AS has_device, "
        f"ARRAY(SELECT n.{col(n, 'created_at')} FROM {q(n.db_table)} n "
        f"JOIN {q(kind.db_table)} nk ON nk.{col(kind, 'id')} = n.{col(n, 'kind')} "
        # "+ 0": the condition of the campaign rows' (recipient, created_at) index, not the campaign index's,
        # so the recipient's campaign rows come by the former whatever the statistics say (policy._campaign_rows).
        f"WHERE n.{col(n, 'recipient')} = r.{col(recipient, 'id')} AND n.{col(n, 'campaign')} + 0 IS NOT NULL "
        f"AND nk.{col(kind, 'category')} = k.{col(kind, 'category')} AND n.{col(n, 'priority')} = %(standard)s "
        f"AND n.{col(n, 'created_at')} > %(now)s - make_interval(secs => (SELECT w.seconds "
        "FROM unnest(%(categories)s::text[], %(seconds)s::float8[]) AS w(category, seconds) "
        f"WHERE w.category = k.{col(kind, 'category')})) "
        f"AND n.{col(n, 'state')} <> %(suppressed)s ORDER BY n.{col(n, 'created_at')}) AS events "
        f"FROM {q(kind.db_table)} k LEFT JOIN {q(recipient.db_table)} r ON r.{col(recipient, 'user_id')} = %(user_id)s "
        f"WHERE k.{col(kind, 'name')} = %(kind)s) "
        "SELECT base.*, v.* FROM base LEFT JOIN LATERAL (SELECT DISTINCT ON "
        f"(tv.{col(version, 'channel')}, tv.{col(version, 'language')}) {columns(version, 'tv', 'v')} "
        f"FROM {q(version.db_table)} tv WHERE tv.{col(version, 'kind')} = {kind_id} "
        f"AND tv.{col(version, 'status')} = %(approved)s "
        f"AND tv.{col(version, 'language')} IN ({language}, {default_language}) "
        f"ORDER BY tv.{col(version, 'channel')}, tv.{col(version, 'language')}, tv.{col(version, 'version')} DESC"
        ") v ON true"
    )


@cache
def _reading(model: type[Model]) -> tuple[list[str], list[tuple]]:
    """The concrete fields' attnames, and per field its column and converters, as Django's compiler reads a row."""
    names, conversions = [], []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        names.append(field.attname)
        conversions.append((column, connection.ops.get_db_converters(column) + column.get_db_converters(connection)))
    return names, conversions


def _instance(model: type[Model], values: tuple):
    """A model instance read from ``values`` (its concrete fields' columns in order), as a query would build it."""
    names, conversions = _reading(model)
    converted = []
    for (column, converters), value in zip(conversions, values, strict=True):
        for converter in converters:
            value = converter(value, column, connection)
        converted.append(value)
    return model.from_db(connection.alias, names, converted)


def _widest_windows() -> tuple[list[str], list[float]]:
    """Per category with rate limits, the seconds of its widest window (every window, as ``_rate_plan`` bounds)."""
    limits = settings.NOTIFY["RATE_LIMITS"]
    categories = [category for category, windows in limits.items() if windows]
    seconds = [float(max(policy.WINDOW_SECONDS[unit] for unit in limits[c]) + _SLACK_SECONDS) for c in categories]
    return categories, seconds


def _parameters(kind_name: str, user_id: str, now: datetime) -> dict:
    """The values ``_statement`` names, for a send of ``kind_name`` to ``user_id`` at ``now``."""
    categories, seconds = _widest_windows()
    return {
        "kind": kind_name, "user_id": user_id, "now": now, "categories": categories, "seconds": seconds,
        "standard": Priority.STANDARD, "suppressed": State.SUPPRESSED, "approved": TemplateVersion.Status.APPROVED,
    }  # fmt: skip


def _read(kind_name: str, user_id: str, now: datetime) -> list[tuple]:
    # Prepared: PostgreSQL planned it on every send, at four times the cost of running it.
    with prepared_cursor() as cursor:
        cursor.execute(_statement(), _parameters(kind_name, user_id, now))
        return cursor.fetchall()


def load(kind_name: str, user_id: str, now: datetime) -> tuple[Kind | None, Recipient | None, policy.Facts, VersionFor]:
    """The kind named ``kind_name`` and the recipient ``user_id`` (None when unknown), the recipient's
    ``policy.Facts`` for the kind at ``now``, and the version choice (``rendering.select_version``'s answer
    for this kind and the recipient's language), from one statement. PostgreSQL only.
    """
    rows = _read(kind_name, user_id, now)
    if not rows:
        return None, None, policy.Facts({}, False, []), rendering.select_version
    sizes = [len(model._meta.concrete_fields) for model in _MODELS]
    first = rows[0]
    kind = _instance(Kind, first[: sizes[0]])
    rest = first[sizes[0] :]
    if rest[0] is None:  # no recipient: the first recipient column, its id, is NULL
        return kind, None, policy.Facts({}, False, []), rendering.select_version
    recipient = _instance(Recipient, rest[: sizes[1]])
    channels, enabled, has_device, events = rest[sizes[1] : sizes[1] + 4]
    facts = policy.Facts(dict(zip(channels, enabled, strict=True)), has_device, [at.timestamp() for at in events])
    newest: dict[tuple[str, str], TemplateVersion] = {}
    for row in rows:
        values = row[sum(sizes[:2]) + 4 :]
        if values[0] is not None:
            version = _instance(TemplateVersion, values)
            version.kind = kind  # its name is in the answer (str(version)): not read again
            newest[version.channel, version.language] = version
    return kind, recipient, facts, _choice(newest)


def _choice(newest: dict[tuple[str, str], TemplateVersion]) -> VersionFor:
    """``rendering.select_version`` over the versions read: the language's newest, else the kind's default's."""

    def version_for(kind: Kind, channel: str, language: str) -> TemplateVersion | None:
        return newest.get((channel, language)) or newest.get((channel, kind.default_language))

    return version_for
