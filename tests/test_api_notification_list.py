"""GET /api/v1/notifications?user_id=…: newest first, keyset pages, filters, only the caller's own rows."""

import base64
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from backend.notifications.api.listing import encode_cursor
from backend.notifications.models import ApiClient, Notification

pytestmark = pytest.mark.usefixtures("demo_data")

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def as_client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


@pytest.fixture
def shipped(send):
    """Send ``shipped`` to a user for each order, one minute apart in created_at (oldest first); return the ids."""

    def _shipped(orders: range, user_id: str = "u-en-1") -> list[str]:
        ids = []
        for order in orders:
            body = {"user_id": user_id, "kind": "shipped", "params": {"order": str(order)}}
            pk = send(body, key=f"order-{order}-{user_id}").json()["id"]
            Notification.objects.filter(pk=pk).update(created_at=START + timedelta(minutes=order))
            ids.append(pk)
        return ids

    return _shipped


def listed(api, **query) -> dict:
    response = api.get("/api/v1/notifications", query)
    assert response.status_code == 200, response.content
    return response.json()


def ids(page: dict) -> list[str]:
    return [row["id"] for row in page["results"]]


def test_it_lists_a_persons_notifications_newest_first(api, shipped):
    sent = shipped(range(1, 4))
    page = listed(api, user_id="u-en-1")
    assert ids(page) == sent[::-1]
    assert (page["next"], page["previous"]) == (None, None)
    first = page["results"][0]
    assert (first["user_id"], first["kind"], first["state"]) == ("u-en-1", "shipped", "queued")
    assert first["params"] == {"order": "3"}
    assert "state_history" not in first


def test_pages_follow_the_cursors_both_ways_without_gaps_or_repeats(api, shipped):
    sent = shipped(range(1, 6))[::-1]  # newest first
    first = listed(api, user_id="u-en-1", limit=2)
    assert ids(first) == sent[0:2] and first["previous"] is None
    second = listed(api, user_id="u-en-1", limit=2, after=first["next"])
    assert ids(second) == sent[2:4]
    third = listed(api, user_id="u-en-1", limit=2, after=second["next"])
    assert ids(third) == sent[4:5] and third["next"] is None
    back = listed(api, user_id="u-en-1", limit=2, before=third["previous"])
    assert ids(back) == sent[2:4]
    top = listed(api, user_id="u-en-1", limit=2, before=back["previous"])
    assert ids(top) == sent[0:2] and top["previous"] is None


def test_rows_with_the_same_created_at_are_paged_by_id(api, shipped):
    sent = shipped(range(1, 4))
    Notification.objects.update(created_at=START)
    by_id = sorted(sent, reverse=True)
    first = listed(api, user_id="u-en-1", limit=2)
    second = listed(api, user_id="u-en-1", limit=2, after=first["next"])
    assert ids(first) + ids(second) == by_id


def test_it_filters_by_kind_and_state(api, shipped, send):
    shipped(range(1, 3))
    otp = send({"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}}, key="login-1").json()["id"]
    Notification.objects.filter(pk=otp).update(state="sent")
    assert ids(listed(api, user_id="u-en-1", kind="otp")) == [otp]
    assert ids(listed(api, user_id="u-en-1", state="sent")) == [otp]
    assert len(listed(api, user_id="u-en-1", state="queued")["results"]) == 2


def test_secret_params_are_masked_in_the_list(api, send):
    send({"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}}, key="login-1")
    assert listed(api, user_id="u-en-1")["results"][0]["params"] == {"code": "••••••"}


def test_other_clients_rows_are_not_visible(api, shipped):
    mine = shipped(range(1, 3))
    _client, billing_key = ApiClient.issue("billing")
    billing = as_client(billing_key)
    body = {"user_id": "u-en-1", "kind": "shipped", "params": {"order": "99"}}
    theirs = billing.post("/api/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY="order-99").json()["id"]
    assert set(ids(listed(api, user_id="u-en-1"))) == set(mine)
    assert ids(listed(billing, user_id="u-en-1")) == [theirs]


def test_a_key_allowed_more_sees_every_clients_rows(api, shipped):
    mine = shipped(range(1, 3))
    _client, key = ApiClient.issue("support-tools")
    ApiClient.objects.filter(name="support-tools").update(reads_all_notifications=True)
    assert set(ids(listed(as_client(key), user_id="u-en-1"))) == set(mine)


def test_an_unknown_user_has_an_empty_list(api):
    assert listed(api, user_id="nobody") == {"results": [], "next": None, "previous": None}


def test_the_list_costs_one_query_after_authentication(api, shipped, django_assert_max_num_queries):
    shipped(range(1, 6))
    with django_assert_max_num_queries(2):  # the key's client, the page (with kind, user, template)
        assert len(listed(api, user_id="u-en-1")["results"]) == 5


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({}, "user_id", "This field is required."),
        ({"user_id": "u-en-1", "limit": "101"}, "limit", "Ensure this value is less than or equal to 100."),
        ({"user_id": "u-en-1", "limit": "0"}, "limit", "Ensure this value is greater than or equal to 1."),
        ({"user_id": "u-en-1", "state": "lost"}, "state", '"lost" is not a valid choice.'),
        (
            {"user_id": "u-en-1", "after": "bm9wZQ"},
            "after",
            "Not a cursor of this list: pass a 'next' or 'previous' value unchanged.",
        ),
        ({"user_id": "u-en-1", "usr": "x"}, "usr", "Unknown field."),
        # Whose list: a or b? The last one alone was listed.
        ({"user_id": ["u-ar-1", "u-en-1"]}, "user_id", "Given 2 times; give it once."),
    ],
)
def test_bad_queries_are_422_naming_the_parameter(api, query, field, message):
    response = api.get("/api/v1/notifications", query)
    assert response.status_code == 422
    assert response.json()["fields"] == {field: [message]}


def _forged(moment: str) -> str:
    return base64.urlsafe_b64encode(f"{moment}|00000000-0000-0000-0000-000000000000".encode()).decode()


@pytest.mark.parametrize("moment", ["0001-01-01T00:30:00+01:00", "9999-12-31T23:00:00-02:00"])
def test_a_forged_cursor_outside_the_calendar_in_utc_is_422_not_500(api, moment):
    """parse_datetime takes any year and offset; in UTC these fall before year 1 or after 9999."""
    response = api.get("/api/v1/notifications", {"user_id": "u-en-1", "after": _forged(moment)})
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "after": ["Not a cursor of this list: pass a 'next' or 'previous' value unchanged."]
    }


def test_a_forged_cursor_with_an_offset_postgresql_refuses_is_read_in_utc(api, shipped):
    """PostgreSQL refuses offsets past ±15:59 (a DataError, the 500 this was); the same instant in UTC is fine."""
    shipped(range(1, 3))
    response = api.get("/api/v1/notifications", {"user_id": "u-en-1", "before": _forged("0001-01-01T00:00:00-23:59")})
    assert response.status_code == 200
    assert len(response.json()["results"]) == 2


def test_after_and_before_together_are_refused(api, shipped):
    cursor = encode_cursor(Notification.objects.get(pk=shipped(range(1, 2))[0]))
    response = api.get("/api/v1/notifications", {"user_id": "u-en-1", "after": cursor, "before": cursor})
    assert response.status_code == 422
    assert response.json()["fields"] == {"before": ["Give 'after' or 'before', not both."]}


def test_the_list_needs_a_key(db):
    assert APIClient().get("/api/v1/notifications", {"user_id": "u-en-1"}).status_code == 401
