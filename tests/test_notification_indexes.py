"""The notification table's indexes (migrations 0011, 0024, 0030): none that another covers, sparse ones where set.

A campaign inserts a million notifications at once and each index costs every insert (README
"Benchmarks"); a delivery changes the state twice, and each change writes an entry in every index the
new row version matches. The lookups the dropped ones served still find an index.
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


def test_the_recipient_is_indexed_as_the_first_column_of_its_history_order_and_of_its_campaign_rows(indexes):
    with_recipient = {name for name, definition in indexes.items() if "recipient_id" in definition}

    assert with_recipient == {"notification_recipient_idx", "notification_campaign_rcpt_idx"}
    assert indexes["notification_recipient_idx"].endswith("(recipient_id, created_at DESC)")


@pytest.mark.parametrize(
    "name, columns, condition",
    [
        ("notification_client_idx", "(client_id)", "WHERE (client_id IS NOT NULL)"),
        ("notification_digest_idx", "(digest_id)", "WHERE (digest_id IS NOT NULL)"),
        ("notification_ref_search_idx", "(provider_ref)", "WHERE (NOT ((provider_ref)::text = ''::text))"),
        ("notification_campaign_idx", "(campaign_id, state)", "WHERE (campaign_id IS NOT NULL)"),
        # Written as the rate-limit read writes it, which the campaign index's condition does not serve (0030).
        ("notification_campaign_rcpt_idx", "(recipient_id, created_at)", "WHERE ((campaign_id + 0) IS NOT NULL)"),
    ],
)
def test_sparse_columns_are_indexed_only_where_set(indexes, name, columns, condition):
    assert indexes[name].endswith(f"{columns} {condition}")
    assert sum(columns in definition for definition in indexes.values()) == 1


def test_kind_and_template_version_have_no_index(indexes):
    assert not [
        definition for definition in indexes.values() if "kind_id" in definition or "template_version" in definition
    ]


def test_an_api_row_being_delivered_matches_five_btree_indexes_in_each_state_it_passes(demo_data):
    """Queued, sending, sent: the index entries each version of an API client's row writes (the sent_at BRIN aside)."""
    from backend.notifications.models import ApiClient, Kind, Recipient

    client, _ = ApiClient.issue("index-test")
    kind, recipient = Kind.objects.get(name="shipped"), Recipient.objects.get(user_id="u-en-1")
    row = Notification.objects.create(
        idempotency_key="k", idempotency_scope=f"client:{client.pk}", client=client, recipient=recipient, kind=kind,
        channel="sms", priority="standard", queued_at="2026-12-01T10:00:00Z",
    )  # fmt: skip
    matched = _matched_while_delivered(row)
    always = [
        "notification_client_idx", "notification_idempotency", "notification_recipient_idx",
        "notifications_notification_pkey",
    ]  # fmt: skip
    assert matched == {
        "queued": sorted([*always, "notification_tier_queue_idx"]),
        "sending": sorted([*always, "notification_lease_idx"]),
        "sent": sorted([*always, "notification_ref_search_idx"]),
    }


def test_a_campaign_row_being_delivered_matches_the_campaign_indexes_besides(demo_data):
    """A campaign's row pays for the campaign indexes: (campaign, state), (recipient, created_at), once sent (campaign,
    sent_at). The second is the rate-limit read's (migration 0030), which API rows never meet (the test above)."""
    from backend.notifications.models import Kind, Recipient
    from campaigns.models import Campaign, Segment

    kind, recipient = Kind.objects.get(name="shipped"), Recipient.objects.get(user_id="u-en-1")
    segment = Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)
    campaign = Campaign.objects.create(name="Index test", kind=kind, channel="sms", segment=segment)
    row = Notification.objects.create(
        idempotency_key="k", idempotency_scope=f"campaign:{campaign.pk}", campaign=campaign, recipient=recipient,
        kind=kind, channel="sms", priority="standard", queued_at="2026-12-01T10:00:00Z",
    )  # fmt: skip
    matched = _matched_while_delivered(row)
    always = [
        "notification_campaign_idx", "notification_campaign_rcpt_idx", "notification_idempotency",
        "notification_recipient_idx", "notifications_notification_pkey",
    ]  # fmt: skip
    assert matched == {
        "queued": sorted([*always, "notification_tier_queue_idx"]),
        "sending": sorted([*always, "notification_lease_idx"]),
        "sent": sorted([*always, "notification_campaign_sent_idx", "notification_ref_search_idx"]),
    }


def _matched_while_delivered(row: Notification) -> dict[str, list[str]]:
    """Per state a delivery moves ``row`` through (queued, sending, sent), the B-tree indexes its version meets."""
    matched = {}
    for state, changes in [
        ("queued", {}),
        ("sending", {"lease_until": "2026-12-01T10:00:30Z"}),
        ("sent", {"provider": "twilio", "provider_ref": "SM1", "sent_at": "2026-12-01T10:00:01Z"}),
    ]:
        Notification.objects.filter(pk=row.pk).update(state=state, **changes)
        matched[state] = sorted(_btree_indexes_matching(row.pk))
    return matched


def _btree_indexes_matching(pk) -> list[str]:
    """The B-tree indexes of the notification table whose condition (if any) the row ``pk`` meets."""
    names, table = [], Notification._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.relname, pg_get_expr(x.indpred, x.indrelid) FROM pg_index x"
            " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_am a ON a.oid = i.relam"
            " WHERE x.indrelid = %s::regclass AND a.amname = 'btree'",
            [table],
        )
        for name, condition in cursor.fetchall():
            cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {table} WHERE id = %s AND ({condition or 'true'}))", [pk])
            if cursor.fetchone()[0]:
                names.append(name)
    return names


# The reads the dropped indexes served, as their callers make them, by the index that serves each now
# (querysets: nothing is read until a test asks for the plan).
LOOKUPS = {
    # The sweeper's scan of API rows whose send_at came (backend/notifications/delivery/sweeper.py).
    "notification_scheduled_idx": Notification.objects.filter(
        priority__in=["high", "standard"],
        state="scheduled",
        send_at__lte="2026-12-01T10:00:00Z",
        campaign__isnull=True,
    ),
    # A delivery receipt's match (backend/notifications/receipts/apply.py).
    "notification_ref_search_idx": Notification.objects.filter(provider__in=["twilio"], provider_ref="SM1"),
    # A campaign's progress per state (campaigns/report.py).
    "notification_campaign_idx": Notification.objects.filter(campaign_id=1, state="sent"),
}


@pytest.mark.parametrize("index", LOOKUPS)
def test_the_lookups_of_the_dropped_indexes_find_another(db, index):
    with connection.cursor() as cursor:
        # An empty table is read whole by any plan: ask for one that uses an index, as a large table does.
        cursor.execute("SET LOCAL enable_seqscan = off")
    assert index in LOOKUPS[index].explain()
