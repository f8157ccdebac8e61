"""The notification table's indexes (migration 0011): none that another covers, sparse columns indexed only where set.

A campaign inserts a million notifications at once and each index costs every insert (README
"Benchmarks"); the lookups the dropped ones served still find an index.
"""

import pytest
from django.db import connection

from backend.notifications.models import Notification


def index_definitions() -> dict[str, str]:
    """Index name → its CREATE INDEX statement, as PostgreSQL reports it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [Notification._meta.db_table])
        return dict(cursor.fetchall())


@pytest.fixture
def indexes(db) -> dict[str, str]:
    return index_definitions()


def test_idempotency_keys_are_indexed_only_with_their_scope(indexes):
    with_key = [definition for definition in indexes.values() if "idempotency_key" in definition]

    assert len(with_key) == 1
    assert "UNIQUE" in with_key[0] and "(idempotency_scope, idempotency_key)" in with_key[0]


def test_the_recipient_is_indexed_once_as_the_first_column_of_its_history_order(indexes):
    with_recipient = [definition for definition in indexes.values() if "recipient_id" in definition]

    assert with_recipient == [indexes["notification_recipient_idx"]]
    assert "(recipient_id, created_at DESC)" in with_recipient[0]


@pytest.mark.parametrize(
    "name, columns, condition",
    [
        ("notification_client_idx", "(client_id)", "WHERE (client_id IS NOT NULL)"),
        ("notification_digest_idx", "(digest_id)", "WHERE (digest_id IS NOT NULL)"),
        ("notification_provider_ref_idx", "(provider, provider_ref)", "WHERE (NOT ((provider_ref)::text = ''::text))"),
    ],
)
def test_sparse_columns_are_indexed_only_where_set(indexes, name, columns, condition):
    assert indexes[name].endswith(f"{columns} {condition}")
    assert sum(columns in definition for definition in indexes.values()) == 1
