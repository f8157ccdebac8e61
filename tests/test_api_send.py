"""POST /api/v1/notifications: accept, idempotency, validation, tiers."""

from datetime import UTC, date, datetime

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from backend.notifications.models import ApiClient, Notification, Recipient, State
from tests.conftest import pending

SHIPPED = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}
NEXT_YEAR = date.today().year + 1

pytestmark = pytest.mark.usefixtures("demo_data")


def test_it_accepts_and_enqueues_on_the_standard_tier_after_commit(send, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = send(SHIPPED)
    assert response.status_code == 202
    body = response.json()
    assert body["state"] == "queued"
    assert body["duplicate"] is False
    assert body["channel"] == "email"
    assert body["priority"] == "standard"
    assert body["template"] == "shipped/ar/email v1"
    assert body["preview"] == "تم شحن طلبك رقم 5012"
    assert [(c["from_state"], c["to_state"]) for c in body["state_history"]] == [("", "queued")]
    assert len(callbacks) == 2  # the enqueue and the /metrics counts, each once the row is committed
    assert (pending("standard"), pending("high")) == (1, 0)


def test_high_priority_kind_goes_to_the_high_tier(send, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = send({"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}}, key="login-u-en-1-1")
    assert response.status_code == 202
    assert response.json()["priority"] == "high"
    assert response.json()["channel"] == "sms"
    assert (pending("high"), pending("standard")) == (1, 0)


def test_it_enqueues_nothing_when_the_transaction_does_not_commit(send):
    # Without executing on-commit callbacks, nothing may reach the queue.
    assert send(SHIPPED).status_code == 202
    assert pending("standard") == 0


def test_same_key_and_body_returns_the_original(send):
    first = send(SHIPPED)
    again = send(SHIPPED)
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["duplicate"] is True
    assert Notification.objects.count() == 1


def test_same_key_same_body_in_other_key_order_is_a_duplicate(send):
    first = send(SHIPPED)
    reordered = {"params": {"order": "5012"}, "kind": "shipped", "user_id": "u-ar-1"}
    assert send(reordered).json()["id"] == first.json()["id"]


def test_same_key_different_body_is_refused(send):
    send(SHIPPED)
    response = send({**SHIPPED, "params": {"order": "5013"}})
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "Idempotency-Key": [
            "'order-5012-shipped' was already used for a different request; use a new key for a new event."
        ]
    }
    assert Notification.objects.count() == 1


def test_two_clients_may_use_the_same_key_for_different_events(send, db):
    from rest_framework.test import APIClient

    from backend.notifications.models import ApiClient

    _, billing_key = ApiClient.issue("billing")
    billing = APIClient()
    billing.credentials(HTTP_AUTHORIZATION=f"Bearer {billing_key}")
    orders = send(SHIPPED, key="5012")
    other = billing.post("/api/v1/notifications", SHIPPED, format="json", HTTP_IDEMPOTENCY_KEY="5012")
    assert (orders.status_code, other.status_code) == (202, 202)
    assert orders.json()["id"] != other.json()["id"]


def test_duplicate_is_found_after_redis_lost_its_keys(send):
    from backend.notifications.queues import HUEYS

    first = send(SHIPPED)
    HUEYS["high"].storage.conn.flushdb()
    again = send(SHIPPED)
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])


def forget_key(orders_service, key: str) -> None:
    """Drop one idempotency key from the Redis fast path (as its 24 h TTL or a restart would); the rest stays."""
    from backend.notifications import idempotency
    from backend.notifications.actions import scope_of
    from backend.notifications.queues import HUEYS

    assert HUEYS["high"].storage.conn.delete(idempotency._cache_key(scope_of(orders_service[0]), key)) == 1


def test_a_duplicate_redis_forgot_never_counts_against_its_users_rate_limit(send, orders_service, settings):
    """Redis no longer knew the key, so the policy counted the send before the INSERT found it taken: the
    duplicate's place in the user's window is given back (``policy.forget``)."""
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 2}}}
    assert send(SHIPPED).status_code == 202
    forget_key(orders_service, "order-5012-shipped")

    again = send(SHIPPED)
    second = send({**SHIPPED, "params": {"order": "5013"}}, key="order-5013-shipped")
    third = send({**SHIPPED, "params": {"order": "5014"}}, key="order-5014-shipped")

    assert [(r.status_code, r.json()["state"], r.json()["reason"]) for r in (again, second, third)] == [
        (200, "queued", ""), (202, "queued", ""), (202, "suppressed", "rate-limited")
    ]  # fmt: skip


def test_a_duplicate_otp_redis_forgot_never_takes_a_place_in_its_phones_limit(send, orders_service, settings):
    settings.NOTIFY = {**settings.NOTIFY, "OTP_LIMIT": 2}
    otp = {"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}}
    assert send(otp, key="login-1").status_code == 202
    forget_key(orders_service, "login-1")

    answers = [send(otp, key="login-1"), send(otp, key="login-2"), send(otp, key="login-3")]

    assert [(r.status_code, r.json()["state"], r.json()["reason"]) for r in answers] == [
        (200, "queued", ""), (202, "queued", ""), (202, "suppressed", "otp-limit")
    ]  # fmt: skip


def test_a_send_the_database_failed_to_store_keeps_no_place_in_the_rate_limit(send, settings, monkeypatch):
    """The 503 says to retry with the same key: the retry must not find the user's window taken by the failure."""
    from importlib import import_module

    from django.db import OperationalError

    accept = import_module("backend.notifications.actions.accept")  # the module, not the function

    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}}
    stored = accept.insert_accepted

    def lost_connection(rows, now):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(accept, "insert_accepted", lost_connection)
    assert send(SHIPPED).status_code == 503
    monkeypatch.setattr(accept, "insert_accepted", stored)

    again = send(SHIPPED)
    assert (again.status_code, again.json()["state"], again.json()["reason"]) == (202, "queued", "")
    over = send({**SHIPPED, "params": {"order": "5013"}}, key="order-5013-shipped")
    assert (over.json()["state"], over.json()["reason"]) == ("suppressed", "rate-limited")


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({**SHIPPED, "kind": "nope"}, "kind", "unknown kind 'nope'"),
        ({**SHIPPED, "user_id": "ghost"}, "user_id",
         "unknown user 'ghost': create it first with PUT /api/v1/users/{user_id}"),
        ({**SHIPPED, "params": {}}, "params", "missing params: order"),
        ({**SHIPPED, "channel": "fax"}, "channel", '"fax" is not a valid choice.'),
        ({**SHIPPED, "priority": "urgent"}, "priority", '"urgent" is not a valid choice.'),
        ({**SHIPPED, "send_at": "2026-12-01T09:00:00"}, "send_at",
         "Include a UTC offset or Z, e.g. 2026-12-01T09:00:00Z."),
        ({**SHIPPED, "send_at": "tomorrow"}, "send_at",
         "Datetime has wrong format. Use one of these formats instead: "
         "YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z]."),
        ({**SHIPPED, "params": ["5012"]}, "params", 'Expected a dictionary of items but got type "list".'),
        ({**SHIPPED, "colour": "red"}, "colour", "Unknown field."),
        ({"kind": "shipped"}, "user_id", "This field is required."),
        ({**SHIPPED, "kind": "Bad Kind!"}, "kind",
         'Enter a valid "slug" consisting of letters, numbers, underscores or hyphens.'),
        ({**SHIPPED, "params": {"order": "x" * 20000}}, "params", "Params may be at most 16384 bytes of JSON."),
        ({**SHIPPED, "params": {"order": "50\x0012"}}, "params", "params.order: text may not contain NUL characters."),
        ({**SHIPPED, "params": {"order": "1" * 13}}, "params", "order: at most 12 characters for kind 'shipped'."),
        ({**SHIPPED, "send_at": "2030-02-30T00:00:00Z"}, "send_at", "Not a real date and time (e.g. February 30)."),
        ({**SHIPPED, "send_at": "2030-01-01T24:00:00Z"}, "send_at", "Not a real date and time (e.g. February 30)."),
        ({**SHIPPED, "send_at": "9999-12-31T23:59:59Z"}, "send_at", "May be at most 366 days ahead."),
        ({**SHIPPED, "user_id": 1}, "user_id", "Must be a string."),
        ({**SHIPPED, "user_id": " u-ar-1"}, "user_id", "May not start or end with spaces."),
        ({**SHIPPED, "user_id": "u\nar"}, "user_id", "May not contain control characters or invalid UTF-8."),
    ],
)  # fmt: skip
def test_bad_input_is_a_422_naming_the_field(send, body, field, message):
    response = send(body)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid"
    assert response.json()["fields"][field] == [message]
    assert Notification.objects.count() == 0


@pytest.mark.parametrize(
    ("headers", "raw", "status", "message"),
    [
        ({}, '{"user_id": "u-ar-1"}', 400,
         "Missing 'Idempotency-Key' header: name the event, e.g. order-5012-shipped."),
        ({"HTTP_IDEMPOTENCY_KEY": "k" * 256}, "{}", 400, "'Idempotency-Key' may be at most 255 characters."),
        ({"HTTP_IDEMPOTENCY_KEY": "k"}, "{not json", 400,
         "JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ({"HTTP_IDEMPOTENCY_KEY": "k"}, "[1, 2]", 400, "The body must be a JSON object."),
    ],
)  # fmt: skip
def test_malformed_requests_are_a_400(api, headers, raw, status, message):
    response = api.post("/api/v1/notifications", raw, content_type="application/json", **headers)
    assert (response.status_code, response.json()["message"]) == (status, message)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"user_id": "u-ar-1", "user_id": "u-en-1", "kind": "shipped"}', "JSON object has the key 'user_id' twice."),
        ('{"user_id": "u-ar-1", "kind": "shipped", "params": {"order": 1e400}}', "The number 1e400 is too large."),
        ('{"user_id": "u-ar-1", "kind": "shipped", "params": {"order": NaN}}', "NaN is not valid JSON."),
        ("[" * 5000 + "]" * 5000, "JSON may nest at most 64 levels deep."),
        ("[" * 65 + "]" * 65, "JSON may nest at most 64 levels deep."),
    ],
)
def test_json_a_parser_would_have_to_guess_at_is_a_400(api, raw, message):
    response = api.post("/api/v1/notifications", raw, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k")
    assert (response.status_code, response.json()["message"]) == (400, message)


def test_an_unpaired_surrogate_in_params_is_a_422(api):
    raw = '{"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "\\ud800"}}'
    response = api.post("/api/v1/notifications", raw, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k")
    assert (response.status_code, response.json()["fields"]) == (
        422, {"params": ["params.order: text contains an unpaired surrogate (invalid UTF-16)."]},
    )  # fmt: skip


def test_a_utf8_idempotency_key_is_read_as_utf8(send):
    key = "طلب-٥٠١٢-شحن"
    # Django's test client, like a WSGI/ASGI server, hands header bytes over as Latin-1.
    response = send(SHIPPED, key=key.encode().decode("latin-1"))
    assert response.json()["idempotency_key"] == key


@pytest.mark.parametrize("control", ["\u202e", "\u2066", "\u202a"], ids=["override", "isolate", "embedding"])
def test_a_key_with_a_bidirectional_control_is_refused(send, control):
    # "order-\u202e1234-exe.txt" would read "order-txt.exe-4321" wherever support sees the key.
    response = send(SHIPPED, key=f"order-{control}1234-exe.txt".encode().decode("latin-1"))
    assert (response.status_code, response.json()["message"]) == (
        400, "'Idempotency-Key' may not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069).",
    )  # fmt: skip
    assert not Notification.objects.exists()


def test_a_body_over_the_size_limit_is_a_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api.post("/api/v1/notifications", {**SHIPPED, "params": {"x": "y" * 2000}}, format="json",
                        HTTP_IDEMPOTENCY_KEY="k")  # fmt: skip
    assert (response.status_code, response.json()["message"]) == (413, "The request body may be at most 1000 bytes.")


def test_a_post_to_an_unknown_api_url_is_a_json_404_not_a_csrf_page(client):
    response = client.post("/api/v1/nope", "{}", content_type="application/json", enforce_csrf_checks=True)
    assert (response.status_code, response.json()["error"]) == (404, "not_found")


@pytest.mark.parametrize("path", ["/api/v1/notifications/", "/api/v1/", "/api/v2/notifications", "/api/v1/users/x/"])
def test_unknown_api_urls_answer_json_even_in_debug(api, settings, path):
    settings.DEBUG = True
    response = api.get(path)
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": f"No such resource: {path}"}


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"order": None}, "params", "missing params: order"),
        ({"order": [1, 2]}, "params", "a list or object param was printed as text; print its items instead"),
    ],
)
def test_params_a_template_cannot_print_are_a_422(send, params, field, message):
    response = send({**SHIPPED, "params": params})
    assert (response.status_code, response.json()["fields"]) == (422, {field: [message]})


def test_a_broken_template_is_blamed_on_the_template_not_the_caller(send):
    from backend.notifications.models import Kind, TemplateVersion

    # Approval refuses a version that does not render: this one is made approved by hand, as if from before.
    TemplateVersion.objects.create(
        kind=Kind.objects.get(name="shipped"), language="ar", channel="email", version=2, status="approved",
        subject="{{ order.__class__ }}", text_body="{{ order }}",
    )  # fmt: skip
    response = send(SHIPPED)
    assert response.status_code == 422
    [message] = response.json()["fields"]["kind"]
    assert message.startswith("the approved template shipped/ar/email v2 cannot be rendered (template error:")
    assert message.endswith("ask the template editors to fix it")


def test_a_body_that_is_not_json_is_a_415(api):
    response = api.post("/api/v1/notifications", "user_id=u", content_type="text/plain", HTTP_IDEMPOTENCY_KEY="k")
    assert response.status_code == 415
    assert response.json()["error"] == "unsupported_media_type"


@pytest.mark.parametrize(
    ("authorization", "message"),
    [
        (None, "Missing 'Authorization: Bearer <API key>' header."),
        ("Bearer ntf_wrong", "Unknown or revoked API key."),
        ("Basic dXNlcjpwYXNz", "Use the header 'Authorization: Bearer <API key>'."),
        ("Bearer", "Use the header 'Authorization: Bearer <API key>'."),
    ],
)
def test_it_refuses_callers_without_a_valid_key(client, authorization, message):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}
    response = client.post(
        "/api/v1/notifications", SHIPPED, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k", **headers
    )
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json() == {"error": "not_authenticated", "message": message}


def test_a_revoked_key_is_refused(send, orders_service):
    client, _ = orders_service
    client.is_active = False
    client.save()
    assert send(SHIPPED).status_code == 401


def test_a_key_revoked_after_use_is_refused_at_once(send, orders_service):
    # The key's lookup is cached per process for seconds; saving the client forgets it.
    assert send(SHIPPED).status_code == 202
    client, _ = orders_service
    client.is_active = False
    client.save()
    assert send(SHIPPED).status_code == 401


def test_a_channel_without_a_provider_is_refused(send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "CHANNEL_PROVIDERS": {"email": "smtp", "sms": "fake-sms"}}
    response = send({**SHIPPED, "channel": "push"})
    assert response.status_code == 422
    assert response.json()["fields"] == {"channel": ["no provider is configured for channel 'push'"]}


def test_future_send_at_is_scheduled_not_queued(send, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = send({**SHIPPED, "send_at": f"{NEXT_YEAR}-01-01T09:00:00+03:00"})
    assert response.status_code == 202
    assert response.json()["state"] == "scheduled"
    assert response.json()["send_at"] == f"{NEXT_YEAR}-01-01T06:00:00Z"
    assert pending("standard") == 0


def test_the_digest_is_no_kind_a_caller_sends(send):
    """Sent directly it reached someone who had opted out of marketing, with no List-Unsubscribe."""
    body = {"user_id": "u-en-1", "kind": "digest", "params": {"items": ["SALE: 70% off"], "count": "1"}}
    response = send(body)
    assert (response.status_code, response.json()["fields"]) == (
        422,
        {"kind": ["digest is made by the platform from held messages; send their own kinds."]},
    )
    assert not Notification.objects.exists()


@pytest.mark.parametrize(
    ("send_at", "status", "state"),
    [
        pytest.param("2026-11-23T12:00:01Z", 202, "queued", id="a-second-inside-the-7-day-window-due-now"),
        pytest.param("2026-11-23T12:00:00Z", 202, "queued", id="the-windows-last-instant"),
        pytest.param("2026-11-23T11:59:59Z", 422, None, id="a-second-past-it"),
        pytest.param("2020-01-01T10:00:00Z", 422, None, id="years-ago"),
    ],
)
def test_a_send_at_whose_validity_window_closed_is_refused(send, send_at, status, state):
    """shipped is valid 7 days (604,800 s) after its send_at; the clock stands at 2026-11-30T12:00:00Z."""
    with time_machine.travel(datetime(2026, 11, 30, 12, 0, tzinfo=UTC), tick=False):
        response = send({**SHIPPED, "send_at": send_at})
    assert response.status_code == status, response.content
    if status == 202:
        assert response.json()["state"] == state
    else:
        message = (
            f"{send_at.replace('Z', '+00:00')} is past: a shipped is valid 604800 s after it, so it could never be "
            "sent. Leave send_at out to send it now."
        )
        assert response.json()["fields"] == {"send_at": [message]}
        assert not Notification.objects.exists()


def test_a_requested_channel_without_an_address_is_recorded_as_suppressed(send, django_capture_on_commit_callbacks):
    from backend.notifications.models import Recipient

    Recipient.objects.filter(user_id="u-ar-1").update(email="")
    with django_capture_on_commit_callbacks(execute=True):
        response = send({**SHIPPED, "channel": "email"})
    assert response.status_code == 202
    assert (response.json()["state"], response.json()["reason"]) == ("suppressed", "no-address")
    assert Notification.objects.get().state == State.SUPPRESSED
    assert pending("standard") == 0


def test_without_a_channel_it_routes_to_the_next_channel_the_user_can_receive(send):
    from backend.notifications.models import Recipient

    Recipient.objects.filter(user_id="u-ar-1").update(email="")
    body = send(SHIPPED).json()
    # shipped goes by email, push, sms: no email address, so push (the demo phone app).
    assert (body["state"], body["channel"]) == ("queued", "push")
    assert body["state_history"][0]["reason"] == "fallback: email: no-address"


def test_the_users_language_falls_back_to_the_kinds_default(send):
    Recipient.objects.create(user_id="u-ur-1", email="imran@example.com", language="ur")  # no Urdu template
    response = send({"user_id": "u-ur-1", "kind": "shipped", "params": {"order": "77"}}, key="order-77-shipped")
    assert response.json().get("template") == "shipped/en/email v1", response.json()
    assert response.json()["preview"] == "Your order 77 has shipped"


def test_a_persian_user_gets_the_persian_template(send):
    response = send({"user_id": "u-fa-1", "kind": "shipped", "params": {"order": "77"}}, key="order-77-shipped")
    assert response.json().get("template") == "shipped/fa/email v1", response.json()
    assert response.json()["preview"] == "سفارش 77 شما ارسال شد"


def test_a_send_is_created_queued_and_given_its_history_at_one_instant(send):
    body = send(SHIPPED).json()
    assert body["created_at"] == body["queued_at"] == body["state_history"][0]["at"], body
    notification = Notification.objects.get(pk=body["id"])
    assert notification.created_at == notification.updated_at == notification.queued_at


def test_get_shows_state_history_and_attempts(api, send):
    created = send(SHIPPED).json()
    response = api.get(f"/api/v1/notifications/{created['id']}")
    assert response.status_code == 200
    assert response.json()["id"] == created["id"]
    assert response.json()["attempts"] == []
    assert response.json()["state_history"][0]["to_state"] == "queued"


def test_another_client_cannot_read_a_notification_it_did_not_send(api, send):
    created = send(SHIPPED).json()
    _, billing_key = ApiClient.issue("billing")
    billing = APIClient()
    billing.credentials(HTTP_AUTHORIZATION=f"Bearer {billing_key}")
    response = billing.get(f"/api/v1/notifications/{created['id']}")
    assert (response.status_code, response.json()["message"]) == (404, f"No notification with id {created['id']}.")
    assert api.get(f"/api/v1/notifications/{created['id']}").status_code == 200


def test_get_unknown_or_malformed_id_is_a_json_404(api):
    unknown = api.get("/api/v1/notifications/00000000-0000-0000-0000-000000000000")
    assert unknown.status_code == 404
    assert unknown.json()["message"] == "No notification with id 00000000-0000-0000-0000-000000000000."
    malformed = api.get("/api/v1/notifications/not-a-uuid")
    assert malformed.status_code == 404
    assert malformed.json() == {"error": "not_found", "message": "No such resource: /api/v1/notifications/not-a-uuid"}


@pytest.mark.django_db(transaction=True)
def test_the_202_says_queued_even_when_a_worker_claimed_the_row_first(send, monkeypatch):
    from backend.notifications import tasks
    from backend.notifications.delivery import dispatch

    # A free worker takes the row the instant it commits, before the view has built its answer.
    monkeypatch.setattr(
        tasks, "enqueue_delivery", lambda notification_id, tier, delay=None: dispatch.deliver(notification_id)
    )
    response = send({"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}}, key="login-u-en-1-1")

    assert response.status_code == 202
    body = response.json()
    assert (body["state"], body["provider"], body["sending_at"], body["sent_at"]) == ("queued", "", None, None)
    assert [(c["from_state"], c["to_state"]) for c in body["state_history"]] == [("", "queued")]
    assert body["attempts"] == []
    assert Notification.objects.get(pk=body["id"]).state == State.SENT


def test_a_send_costs_one_read_and_one_write(send):
    """Kind, user, preferences, template and campaign rows in one SELECT, then one INSERT of row and history."""
    send(SHIPPED, key="warm-up")  # the API key's lookup and its last_used_at, then cached for seconds
    with CaptureQueriesContext(connection) as queries:
        assert send({**SHIPPED, "params": {"order": "5013"}}, key="order-5013-shipped").status_code == 202
    statements = [q["sql"] for q in queries.captured_queries]
    assert len(statements) == 2
    assert [s.split()[0] for s in statements] == ["WITH"] * 2
    assert "INSERT" not in statements[0] and "INSERT" in statements[1]


def test_a_single_send_stores_the_row_a_batch_stores(send, api):
    """The single send's INSERT binds one value per column, a batch's arrays: both store the same row."""
    body = {**SHIPPED, "params": {"order": "5013", "note": "«ok» \\ 'q'"}, "send_at": f"{NEXT_YEAR}-03-01T09:00:00Z"}
    single = send(body, key="one").json()
    items = [{**body, "idempotency_key": key} for key in ("two", "three")]  # two rows: the arrays' statement
    batch = api.post("/api/v1/notifications/batch", {"items": items}, format="json")
    assert batch.status_code == 200, batch.json()

    rows = {row.idempotency_key: row for row in Notification.objects.all()}
    columns = [f.attname for f in Notification._meta.concrete_fields if f.attname not in ("id", "idempotency_key")]
    differ = {
        c
        for c in columns
        if getattr(rows["one"], c) != getattr(rows["two"], c) and c not in ("created_at", "updated_at")
    }
    assert differ == set()
    assert rows["one"].params == {"order": "5013", "note": "«ok» \\ 'q'"}
    assert Notification.objects.filter(params__note="«ok» \\ 'q'").count() == 3  # a JSON object, not a string
    assert (rows["one"].state, rows["one"].reason, str(rows["one"].pk)) == ("scheduled", "send-at", single["id"])
    assert [(c.from_state, c.to_state, c.reason) for c in rows["one"].state_changes.all()] == [
        ("", "scheduled", "send-at")
    ]
