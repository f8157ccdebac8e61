"""Each kind of support search is served by its index (migration 0020), checked with EXPLAIN.

The tables here are tiny, where a sequential scan (or a bitmap, or a sort) is cheapest whatever the
indexes: the planner is told to avoid them, so the plan shows which index serves the query in its
order. A query that has none still scans the table then, and the test names the query that would.
``bin/bench support_search`` measures the same queries on 5,000,000 rows.
"""

import pytest
from django.db import connection
from django.db.models import Q

from backend.notifications.models import Notification
from backend.support import search
from campaigns.models import Campaign, Segment
from tests.support_setup import make_scene


@pytest.fixture
def scene(demo_data):
    made = make_scene()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
        # On a few rows a scan of the table, a bitmap or a sort is cheapest: ask for the plan that reads
        # the rows in the page's order from an index, which a million rows choose anyway (bin/bench).
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
    return made


def plan(queryset) -> str:
    return queryset.explain()


def page_plans(query: str, kind: str, filters: search.Filters | None = None) -> list[str]:
    lookup = search.resolve(query, kind)
    return [plan(search.query(lookup, filters or search.Filters(), None, 51))]


def test_a_user_id_uses_the_unique_user_id_then_the_recipient_history_index(scene):
    recipients = plan(search.recipient_ids(Q(user_id="u-ar-1")))
    assert "Index Scan using notifications_recipient_user_id" in recipients and "Seq Scan" not in recipients
    [notifications] = page_plans("u-ar-1", "user")
    assert "Index Scan using notification_recipient_idx" in notifications


def test_a_phone_number_uses_the_phone_index(scene):
    recipients = plan(search.recipient_ids(Q(phone="+966501234567")))
    assert "notifications_recipient_phone" in recipients and "Seq Scan" not in recipients


def test_an_email_in_any_case_uses_the_upper_email_index(scene):
    recipients = plan(search.recipient_ids(Q(email_upper="LAYLA@EXAMPLE.COM")))
    assert "recipient_email_upper_idx" in recipients and "Seq Scan" not in recipients


def test_an_idempotency_key_uses_the_unique_scope_key_index(scene):
    # The condition alone: on three rows the planner may as well walk another index for the joins.
    lookup = search.resolve("order-5012-shipped", "key")
    notifications = plan(Notification.objects.filter(lookup.condition))
    assert "notification_idempotency" in notifications and "Seq Scan" not in notifications


def test_a_provider_reference_uses_its_own_index(scene):
    # With one reference the (provider, provider_ref) index, read whole, ties with this one (8.17 against
    # 8.18 after other tests' rolled-back rows): a few hundred references of three providers, as in
    # production, make reading that one whole cost what it does.
    Notification.objects.bulk_create(
        Notification(
            idempotency_key=f"filler-{n}", idempotency_scope="internal", request_hash="",
            recipient=scene.sent.recipient,
            kind=scene.sent.kind, channel="sms", priority="standard", state="sent",
            provider=("twilio", "vonage", "unifonic")[n % 3], provider_ref=f"REF{n:06d}",
        )
        for n in range(600)
    )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    [notifications] = page_plans("SM5012abc", "reference")
    assert "notification_ref_search_idx" in notifications and "Seq Scan" not in notifications


def test_a_notification_id_uses_the_primary_key(scene):
    # The condition alone, as for a key: on a few rows the whole page's query may as well walk another index and
    # sort (it did in two full runs of three, the join's estimates moved by what earlier tests had committed).
    lookup = search.resolve(str(scene.sent.pk), "notification")
    notifications = plan(Notification.objects.filter(lookup.condition))
    assert "notifications_notification_pkey" in notifications and "Seq Scan" not in notifications


def test_a_campaign_is_read_in_key_order_from_the_unique_scope_key_index(scene):
    segment = Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)
    campaign = Campaign.objects.create(name="Weekend", kind=scene.sent.kind, channel="sms", segment=segment)
    for n in Notification.objects.filter(recipient__user_id="u-ar-1"):
        n.campaign, n.idempotency_scope = campaign, f"campaign:{campaign.pk}"
        n.idempotency_key = f"campaign:{campaign.pk}:u-ar-1-{n.pk}"
        n.save(update_fields=["campaign", "idempotency_scope", "idempotency_key"])

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    lookup = search.resolve(f"campaign:{campaign.pk}", "campaign")
    after = search.Cursor(key=f"campaign:{campaign.pk}:u-ar-1-")

    # One ordered range of the (scope, key) index, no sort; the (campaign, state) index is not read.
    for filters, cursor in ((search.Filters(), None), (search.Filters(state="sent"), after)):
        keys = plan(search.query(lookup, filters, cursor, 51))
        assert "Index Scan using notification_idempotency" in keys, keys
        assert "Sort" not in keys and "Seq Scan" not in keys and "notification_campaign_idx" not in keys
