"""The inbox's HTTP fallback: the same messages and commands as the socket, with the same token."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from rest_framework.test import APIClient

from backend.notifications.delivery.dispatch import deliver
from inbox import actions, events, tokens
from inbox.models import InboxMessage

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def inbox_of(send):
    """Delivers "order <n> shipped" to a user's inbox the way a worker does; returns the message."""

    def put(user_id: str, order: int) -> InboxMessage:
        body = {"user_id": user_id, "kind": "shipped", "channel": "inapp", "params": {"order": str(order)}}
        pk = send(body, key=f"order-{order}-{user_id}").json()["id"]
        deliver(pk)
        return InboxMessage.objects.get(notification_id=pk)

    return put


def orders(page: dict) -> list[str]:
    """The order numbers of a page's messages ("تم شحن طلبك رقم 5" → "5")."""
    return [message["title"].split()[-1] for message in page["messages"]]


def as_user(user_id: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tokens.issue(user_id).value}")
    return client


@pytest.fixture
def layla() -> APIClient:
    return as_user("u-ar-1")


def test_the_latest_page_comes_oldest_first_with_the_unread_count(layla, inbox_of, django_assert_num_queries):
    messages = [inbox_of("u-ar-1", n) for n in range(1, 4)]
    inbox_of("u-en-1", 9)
    with django_assert_num_queries(5):  # the token's record (links.issued_before), recipient, page, unread, newest id
        response = layla.get("/api/v1/users/u-ar-1/inbox")
    assert response.status_code == 200
    assert response.json() == {
        "unread": 3,
        "last_id": messages[-1].pk,
        "messages": [events.message_payload(m) for m in messages],
        "more": False,
    }


def test_after_returns_every_later_message_in_pages(layla, inbox_of):
    messages = [inbox_of("u-ar-1", n) for n in range(1, 8)]
    first = layla.get(f"/api/v1/users/u-ar-1/inbox?after={messages[1].pk}&limit=3").json()
    assert (orders(first), first["more"]) == (["3", "4", "5"], True)
    rest = layla.get(f"/api/v1/users/u-ar-1/inbox?after={first['messages'][-1]['id']}&limit=3").json()
    assert (orders(rest), rest["more"]) == (["6", "7"], False)


def test_before_pages_back_through_older_unarchived_messages(layla, inbox_of):
    messages = [inbox_of("u-ar-1", n) for n in range(1, 6)]
    actions.archive("u-ar-1", messages[1].pk)
    page = layla.get(f"/api/v1/users/u-ar-1/inbox?before={messages[3].pk}&limit=2").json()
    assert (orders(page), page["more"]) == (["1", "3"], False)


def test_marking_read_answers_the_message_and_the_new_count(layla, inbox_of):
    first, second = inbox_of("u-ar-1", 1), inbox_of("u-ar-1", 2)
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        response = layla.post(f"/api/v1/users/u-ar-1/inbox/{first.pk}/read")
    assert response.status_code == 200
    first.refresh_from_db()
    assert first.read_at == now
    assert response.json() == {"message": events.message_payload(first), "unread": 1}
    # Again: nothing changes, same answer.
    assert layla.post(f"/api/v1/users/u-ar-1/inbox/{first.pk}/read").json()["unread"] == 1
    assert InboxMessage.objects.get(pk=second.pk).read_at is None


def test_archiving_hides_the_message_from_the_page_and_the_count(layla, inbox_of):
    first, second = inbox_of("u-ar-1", 1), inbox_of("u-ar-1", 2)
    response = layla.post(f"/api/v1/users/u-ar-1/inbox/{first.pk}/archive")
    assert response.status_code == 200
    assert response.json()["unread"] == 1
    assert response.json()["message"]["archived_at"] is not None
    page = layla.get("/api/v1/users/u-ar-1/inbox").json()
    assert ([m["id"] for m in page["messages"]], page["unread"], page["last_id"]) == ([second.pk], 1, second.pk)


def test_mark_all_read_stops_at_the_newest_message_the_person_has_seen(layla, inbox_of):
    seen = [inbox_of("u-ar-1", n) for n in range(1, 4)]
    arrived_meanwhile = inbox_of("u-ar-1", 4)
    response = layla.post("/api/v1/users/u-ar-1/inbox/read-all", {"through": seen[-1].pk}, format="json")
    assert response.status_code == 200
    assert response.json() == {"ids": [m.pk for m in seen], "unread": 1}
    assert InboxMessage.objects.get(pk=arrived_meanwhile.pk).read_at is None
    assert layla.post("/api/v1/users/u-ar-1/inbox/read-all").json() == {"ids": [arrived_meanwhile.pk], "unread": 0}


def test_another_users_token_sees_nothing(inbox_of):
    message = inbox_of("u-ar-1", 1)
    sam = as_user("u-en-1")
    for response in (
        sam.get("/api/v1/users/u-ar-1/inbox"),
        sam.post(f"/api/v1/users/u-ar-1/inbox/{message.pk}/read"),
        sam.post("/api/v1/users/u-ar-1/inbox/read-all"),
    ):
        assert response.status_code == 403
        assert response.json() == {"error": "forbidden", "message": "This token opens another user's inbox."}
    # On his own inbox, Layla's message id is unknown.
    response = sam.post(f"/api/v1/users/u-en-1/inbox/{message.pk}/read")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": f"No message {message.pk} in this inbox."}
    assert sam.get("/api/v1/users/u-en-1/inbox").json() == {"unread": 0, "last_id": 0, "messages": [], "more": False}
    assert InboxMessage.objects.get(pk=message.pk).read_at is None


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "Missing 'Authorization: Bearer <inbox token>' header."),
        ("Bearer not-a-token", "The inbox token is not valid."),
        ("Token abc", "Missing 'Authorization: Bearer <inbox token>' header."),
    ],
)
def test_a_missing_or_bad_token_is_401(client, authorization, message):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.get("/api/v1/users/u-ar-1/inbox", **headers)
    assert response.status_code == 401
    assert response.json() == {"error": "not_authenticated", "message": message}
    assert response["WWW-Authenticate"] == "Bearer"


def test_an_expired_token_is_401_and_says_so(client):
    with time_machine.travel(timezone.now() - timedelta(minutes=16), tick=False):
        token = tokens.issue("u-ar-1").value
    response = client.get("/api/v1/users/u-ar-1/inbox", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 401
    assert response.json() == {"error": "not_authenticated", "message": "The inbox token has expired; get a new one."}


def test_an_api_key_does_not_open_an_inbox(api):
    response = api.get("/api/v1/users/u-ar-1/inbox")
    assert response.status_code == 401
    assert response.json()["message"] == "The inbox token is not valid."


@pytest.mark.parametrize(
    ("query", "fields"),
    [
        ("after=1&before=5", {"after": ["Give 'after' or 'before', not both."]}),
        ("limit=101", {"limit": ["Ensure this value is less than or equal to 100."]}),
        ("after=x", {"after": ["A valid integer is required."]}),
        ("since=1", {"since": ["Unknown field."]}),
        ("limit=2&limit=50", {"limit": ["Given 2 times; give it once."]}),
    ],
)
def test_bad_query_parameters_are_422_and_named(layla, query, fields):
    response = layla.get(f"/api/v1/users/u-ar-1/inbox?{query}")
    assert response.status_code == 422
    assert response.json()["fields"] == fields


def test_the_openapi_schema_documents_the_inbox(client):
    schema = client.get("/api/v1/openapi.json").json()
    assert {
        "/api/v1/users/{user_id}/inbox-token",
        "/api/v1/users/{user_id}/inbox",
        "/api/v1/users/{user_id}/inbox/read-all",
        "/api/v1/users/{user_id}/inbox/{message_id}/read",
        "/api/v1/users/{user_id}/inbox/{message_id}/archive",
    } <= set(schema["paths"])
    assert schema["paths"]["/api/v1/users/{user_id}/inbox"]["get"]["security"] == [{"inboxToken": []}]
    assert schema["paths"]["/api/v1/users/{user_id}/inbox-token"]["post"]["security"] == [{"apiKey": []}]
