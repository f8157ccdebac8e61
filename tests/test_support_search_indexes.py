"""Each kind of support search is served by its index (migration 0020), checked with EXPLAIN.

The tables here are tiny, where a sequential scan (or a bitmap, or a sort) is cheapest whatever the
indexes: the planner is told to avoid them, so the plan shows which index serves the query in its
order. A query that has none still scans the table then, and the test names the query that would.
``bin/bench support_search`` measures the same queries on 5,000,000 rows.
"""

import re

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
    [notifications] = page_plans("SM5012abc", "reference")
    assert "notification_ref_search_idx" in notifications and "Seq Scan" not in notifications


def test_a_notification_id_uses_the_primary_key(scene):
    [notifications] = page_plans(str(scene.sent.pk), "notification")
    assert "notifications_notification_pkey" in notifications


def test_a_campaign_is_read_one_ordered_state_range_at_a_time(scene):
    segment = Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)
    campaign = Campaign.objects.create(name="Weekend", kind=scene.sent.kind, channel="sms", segment=segment)
    Notification.objects.filter(recipient__user_id="u-ar-1").update(campaign=campaign)

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    [keys] = page_plans(f"campaign:{campaign.pk}", "campaign")

    # One ordered range per state (sent, suppressed, failed), merged: no sort of the campaign's rows.
    assert len(re.findall(r"Index (Only )?Scan Backward using notification_campaign_idx", keys)) == 3
    assert "Merge Append" in keys and "->  Sort" not in keys and "Seq Scan" not in keys
    [filtered] = page_plans(f"campaign:{campaign.pk}", "campaign", search.Filters(state="sent"))
    assert "Index Scan Backward using notification_campaign_idx" in filtered and "Sort" not in filtered
