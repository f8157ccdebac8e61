"""POST /api/v1/notifications/batch: each item answered as the single send would be, set-based, race-safe."""

import gc
import json
import re
import threading
import zoneinfo
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from decimal import Decimal

import pytest
from django.db import connection, models
from django.test.utils import CaptureQueriesContext
from redis.client import Pipeline
from rest_framework.exceptions import ValidationError

from backend.notifications import actions, idempotency, rate_limits
from backend.notifications.actions import accept_rows
from backend.notifications.api import answers, plain_send
from backend.notifications.api.serializers import AcceptedSerializer, BatchItemSerializer, SendRequestSerializer
from backend.notifications.models import Attempt, Notification, Recipient, StateChange
from backend.notifications.queues import HUEYS
from tests.conftest import pending
from tests.plans_setup import analyze, copies_in_sql, plan_of
from tests.processes import run_embedded

URL = "/api/v1/notifications/batch"

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def customers(demo_data) -> list[str]:
    """A thousand customers with an email address, so no user's rate limit is reached by one batch."""
    users = [Recipient(user_id=f"c-{n}", email=f"c{n}@example.com", language="en") for n in range(1000)]
    Recipient.objects.bulk_create(users)
    return [user.user_id for user in users]


def shipped(user_id: str, order: int) -> dict:
    return {"idempotency_key": f"order-{order}-shipped", "user_id": user_id, "kind": "shipped",
            "params": {"order": str(order)}}  # fmt: skip


def post_batch(api, items: list):
    return api.post(URL, {"items": items}, format="json")


def test_a_thousand_items_with_duplicates_and_invalid_ones_are_each_answered_in_order(
    api, send, customers, django_capture_on_commit_callbacks
):
    items = [shipped(user, n) for n, user in enumerate(customers)]
    earlier = {}
    for n in range(0, 1000, 100):  # ten sent before, one by one: duplicates in the batch
        body = {key: value for key, value in items[n].items() if key != "idempotency_key"}
        earlier[n] = send(body, key=items[n]["idempotency_key"]).json()["id"]
    invalid = {
        7: ({**items[7], "kind": "nope"}, {"kind": ["unknown kind 'nope'"]}),
        250: ({**items[250], "user_id": "ghost"},
              {"user_id": ["unknown user 'ghost': create it first with PUT /api/v1/users/{user_id}"]}),
        501: ({**items[501], "channel": "fax"}, {"channel": ['"fax" is not a valid choice.']}),
        502: ({**items[502], "params": {"order": "50\x0012"}},
              {"params": ["params.order: text may not contain NUL characters."]}),
        999: ({**items[999], "params": {}}, {"params": ["missing params: order"]}),
    }  # fmt: skip
    for n, (item, _) in invalid.items():
        items[n] = item

    with django_capture_on_commit_callbacks(execute=True):
        response = post_batch(api, items)

    assert response.status_code == 200
    body = response.json()
    assert (body["accepted"], body["duplicates"], body["errors"]) == (985, 10, 5)
    results = body["results"]
    for n, result in enumerate(results):
        if n in invalid:
            assert (result["status"], result["body"]["fields"]) == (422, invalid[n][1]), n
        elif n in earlier:
            assert (result["status"], result["body"]["id"], result["body"]["duplicate"]) == (200, earlier[n], True)
        else:
            assert (result["status"], result["body"]["state"], result["body"]["duplicate"]) == (202, "queued", False)
            assert result["body"]["idempotency_key"] == f"order-{n}-shipped"
            assert result["body"]["user_id"] == f"c-{n}"
            assert result["body"]["preview"] == f"Your order {n} has shipped"
    assert Notification.objects.count() == 995
    assert StateChange.objects.count() == 995
    assert pending("standard") == 985  # the new ones, in one hand-over (the single sends ran no on-commit)


def test_the_same_batch_again_is_a_thousand_duplicates(api, customers):
    items = [shipped(user, n) for n, user in enumerate(customers)]
    first = post_batch(api, items).json()
    again = post_batch(api, items).json()

    assert (first["accepted"], again["duplicates"], again["accepted"], again["errors"]) == (1000, 1000, 0, 0)
    assert [r["status"] for r in again["results"]] == [200] * 1000
    assert [r["body"]["id"] for r in again["results"]] == [r["body"]["id"] for r in first["results"]]
    assert Notification.objects.count() == 1000


def test_the_batch_is_set_based(api, customers):
    items = [shipped(user, n) for n, user in enumerate(customers[:500])]
    with CaptureQueriesContext(connection) as queries:
        assert post_batch(api, items).json()["accepted"] == 500
    writes = [q["sql"] for q in queries.captured_queries if "INSERT" in q["sql"]]
    # The notifications and their first state changes, in one statement (accept_rows.insert_accepted).
    assert len(writes) == 1
    assert writes[0].count("INSERT INTO") == 2
    assert "ON CONFLICT" in writes[0]
    assert len(queries.captured_queries) < 20
    # Long lists go as one array each (array_param.in_array), not an IN list of 500 parameters.
    long_in_lists = [q["sql"] for q in queries.captured_queries if re.search(r"IN \((?:[^,()]+, ){20}", q["sql"])]
    assert long_in_lists == []


def test_a_stored_row_is_created_and_updated_when_its_first_history_is_written(api, customers):
    """``accept_rows`` stamps the auto-now fields itself, with the time of the rows' first StateChange."""
    post_batch(api, [shipped(user, n) for n, user in enumerate(customers[:3])])
    rows = Notification.objects.filter(idempotency_key__startswith="order-").prefetch_related("state_changes")
    assert len(rows) == 3
    moments = {(row.created_at, row.updated_at, *(change.at for change in row.state_changes.all())) for row in rows}
    assert len(moments) == 1
    created, updated, first_change = moments.pop()
    assert created == updated == first_change


def test_a_single_send_is_created_and_updated_when_its_first_history_is_written(send):
    answer = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}).json()
    row = Notification.objects.get(pk=answer["id"])

    assert row.created_at == row.updated_at == row.state_changes.get().at


def test_the_notifications_insert_stamps_its_created_and_updated_and_reads_every_other_field():
    _, stamped, json_columns = accept_rows._row_reader()

    assert stamped == ("created_at", "updated_at")
    assert [Notification._meta.concrete_fields[i].name for i, _ in json_columns] == ["params"]


class _Stamped(models.CharField):
    def pre_save(self, model_instance, add):
        return "stamped"


class _OwnClock(models.DateTimeField):
    def pre_save(self, model_instance, add):
        return None


@pytest.mark.parametrize(
    ("field", "reads_attribute"),
    [
        (models.CharField(max_length=8), True),
        (models.UUIDField(), True),
        (models.JSONField(), True),
        (models.DateTimeField(null=True), True),
        (models.DateField(null=True), True),
        (models.DateTimeField(auto_now=True), False),
        (models.DateTimeField(auto_now_add=True), False),
        (models.DateField(auto_now_add=True), False),
        (models.TimeField(auto_now=True), False),
        (models.FileField(), False),
        (models.ForeignKey("notifications.Kind", on_delete=models.CASCADE), True),
        (_Stamped(max_length=8), False),
        (_OwnClock(auto_now=True), False),
    ],
)
def test_only_fields_whose_pre_save_reads_the_attribute_are_read_as_attributes(field, reads_attribute):
    assert accept_rows._pre_save_reads_attribute(field) is reads_attribute


def test_an_item_answers_as_the_single_send_would(api, send):
    body = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}
    single = send(body, key="single").json()
    batched = post_batch(api, [{**body, "idempotency_key": "batched"}]).json()["results"][0]

    assert batched["status"] == 202
    differ = {"id", "idempotency_key", "created_at", "queued_at", "state_history"}
    assert {k: v for k, v in batched["body"].items() if k not in differ} == {
        k: v for k, v in single.items() if k not in differ
    }
    for history in (batched["body"]["state_history"], single["state_history"]):
        assert [(c["from_state"], c["to_state"], c["reason"]) for c in history] == [("", "queued", "")]


def test_an_item_whose_send_at_is_past_its_validity_is_refused_alone(api):
    body = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}
    items = [{**body, "idempotency_key": "old", "send_at": "2020-01-01T10:00:00Z"}, {**body, "idempotency_key": "now"}]
    results = post_batch(api, items).json()["results"]
    assert [result["status"] for result in results] == [422, 202]
    assert results[0]["body"]["fields"]["send_at"][0].startswith("2020-01-01T10:00:00+00:00 is past: a shipped is")


def test_a_key_repeated_in_one_batch_is_one_event(api):
    first = {"idempotency_key": "k-1", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}}
    other_body = {**first, "params": {"order": "2"}}
    results = post_batch(api, [first, first, other_body]).json()["results"]

    assert [r["status"] for r in results] == [202, 200, 422]
    assert results[1]["body"]["id"] == results[0]["body"]["id"]
    assert results[1]["body"]["duplicate"] is True
    assert results[2]["body"]["fields"] == {
        "idempotency_key": ["'k-1' was already used for a different request; use a new key for a new event."]
    }
    assert Notification.objects.count() == 1


def test_a_repeat_of_a_refused_item_is_tried_in_its_place(api):
    refused = {"idempotency_key": "k-1", "user_id": "ghost", "kind": "shipped", "params": {"order": "1"}}
    fixed = {**refused, "user_id": "u-ar-1"}
    results = post_batch(api, [refused, fixed]).json()["results"]
    assert [r["status"] for r in results] == [422, 202]


def test_refused_repeats_of_a_key_are_refused_before_the_first_that_passes_and_its_repeats_after_it(api):
    refused = {"idempotency_key": "k-1", "user_id": "ghost", "kind": "shipped", "params": {"order": "1"}}
    missing = {**refused, "user_id": "u-ar-1", "params": {}}
    fixed = {**refused, "user_id": "u-ar-1"}
    results = post_batch(api, [refused, missing, fixed, {**refused, "params": {"order": "3"}}, fixed]).json()["results"]

    assert [r["status"] for r in results] == [422, 422, 202, 422, 200]
    assert results[0]["body"]["fields"] == {
        "user_id": ["unknown user 'ghost': create it first with PUT /api/v1/users/{user_id}"]
    }
    assert results[1]["body"]["fields"] == {"params": ["missing params: order"]}
    # After the key is taken, a different body is a conflict, whatever its own checks would say.
    assert results[3]["body"]["fields"] == {
        "idempotency_key": ["'k-1' was already used for a different request; use a new key for a new event."]
    }
    assert results[4]["body"]["id"] == results[2]["body"]["id"]
    assert Notification.objects.count() == 1


@pytest.mark.parametrize("vary", [False, True], ids=["identical", "each-its-own-params"])
def test_a_thousand_refused_items_under_one_key_are_checked_together_not_one_round_each(api, vary):
    items = [
        {"idempotency_key": "same", "user_id": "ghost", "kind": "shipped", "params": {"order": str(n if vary else 1)}}
        for n in range(1000)
    ]
    with CaptureQueriesContext(connection) as queries:
        response = post_batch(api, items)

    results = response.json()["results"]
    assert Counter(r["status"] for r in results) == {422: 1000}
    assert {json.dumps(r["body"]["fields"]) for r in results} == {
        json.dumps({"user_id": ["unknown user 'ghost': create it first with PUT /api/v1/users/{user_id}"]})
    }
    # The API key and its last use (2); the first item's round: its key's original, the kinds, the
    # recipients, the devices and its (empty) insert's savepoint and release (6); then its 999 repeats
    # checked together: kinds, recipients, devices (3). Before, each repeat was a round of its own.
    assert len(queries) == 2 + 6 + 3, "\n".join(q["sql"][:90] for q in queries)


@pytest.mark.parametrize(
    ("item", "fields"),
    [
        ("not an object", {"body": ["Each item must be a JSON object: a send with its idempotency_key."]}),
        ({"user_id": "u-ar-1", "kind": "shipped"}, {"idempotency_key": ["This field is required."]}),
        ({"idempotency_key": "  ", "user_id": "u-ar-1", "kind": "shipped"},
         {"idempotency_key": ["This field may not be blank."]}),
        ({"idempotency_key": "a\tb", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}},
         {"idempotency_key": ["idempotency_key may not contain control characters."]}),
        ({"idempotency_key": "a\x00b", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}},
         {"idempotency_key": ["text may not contain NUL characters."]}),  # the field is not named twice
        ({"idempotency_key": "order-\u202e1234", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}},
         {"idempotency_key": ["idempotency_key may not contain bidirectional control characters "
                              "(U+202A–U+202E, U+2066–U+2069)."]}),
        ({"idempotency_key": "k" * 256, "user_id": "u-ar-1", "kind": "shipped"},
         {"idempotency_key": ["Ensure this field has no more than 255 characters."]}),
        ({"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "colour": "red"},
         {"colour": ["Unknown field."]}),
    ],
)  # fmt: skip
def test_a_bad_item_is_a_422_result_and_the_others_are_sent(api, item, fields):
    good = {"idempotency_key": "good", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}}
    response = post_batch(api, [item, good])
    assert response.status_code == 200
    [bad, sent] = response.json()["results"]
    assert (bad["status"], bad["body"]["error"], bad["body"]["fields"]) == (422, "invalid", fields)
    assert sent["status"] == 202


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "JSON parse error - Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        ("[]", "The body must be a JSON object."),
        ('{"items": {}}', 'The body must be {"items": [...]}: a list of sends, each with its idempotency_key.'),
        ('{"items": [], "x": 1}', 'The body must be {"items": [...]}: a list of sends, each with its idempotency_key.'),
        ('{"items": []}', "A batch holds 1 to 1000 items; this one has none."),
        ('{"items": [' + ",".join(["{}"] * 1001) + "]}", "A batch holds 1 to 1000 items; this one has 1001. Split it."),
    ],
)
def test_a_batch_of_the_wrong_shape_is_a_400(api, raw, message):
    response = api.post(URL, raw, content_type="application/json")
    assert (response.status_code, response.json()["message"]) == (400, message)
    assert Notification.objects.count() == 0


def test_a_batch_over_the_body_limit_is_a_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = post_batch(api, [shipped("u-ar-1", n) for n in range(20)])
    assert (response.status_code, response.json()["message"]) == (413, "The request body may be at most 1000 bytes.")


def test_it_refuses_callers_without_a_key(client):
    response = client.post(URL, {"items": [shipped("u-ar-1", 1)]}, content_type="application/json")
    assert (response.status_code, response.json()["error"]) == (401, "not_authenticated")


@pytest.mark.django_db(transaction=True)
def test_two_racing_identical_batches_store_each_key_once(orders_service, customers, settings):
    """Two threads, each with its own PostgreSQL connection, accept the same 1,000 sends at once.

    Each send keeps one place in its user's rate limit, whichever batch the policy counted it in.
    """
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 100}}}
    requests = [
        actions.SendRequest(idempotency_key=f"race-{n}", user_id=user, kind="shipped", params={"order": str(n)},
                            channel=None, priority=None, send_at=None)
        for n, user in enumerate(customers)
    ]  # fmt: skip
    barrier = threading.Barrier(2)

    def accept(_):
        try:
            barrier.wait()
            return actions.accept_batch(requests, client=orders_service[0])
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(accept, range(2))

    assert Notification.objects.count() == 1000
    assert StateChange.objects.count() == 1000
    for a, b in zip(first, second, strict=True):
        assert a.notification.pk == b.notification.pk
        assert sorted([a.duplicate, b.duplicate]) == [False, True]
    windows = Counter(
        rate_limits.count(f"rate:{pk}:transactional:h", 3600)
        for pk in Notification.objects.values_list("recipient_id", flat=True)
    )
    assert windows == {1: 1000}


EMBEDDED = """
import gc
import json
from django.test.utils import setup_test_environment
from rest_framework.test import APIClient
from django.core.management import call_command
from backend.notifications.models import ApiClient, Notification, Recipient
setup_test_environment()  # lets the test client's host "testserver" through ALLOWED_HOSTS
call_command("demo_data", stdout=open("/dev/null", "w"))
Recipient.objects.bulk_create([Recipient(user_id=f"c-{n}", email=f"c{n}@example.com") for n in range(300)])
_, key = ApiClient.issue("orders")
api = APIClient()
api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
items = [{"idempotency_key": f"k-{n}", "user_id": f"c-{n}", "kind": "shipped", "params": {"order": str(n)}}
         for n in range(300)]
first = api.post("/api/v1/notifications/batch", {"items": items}, format="json").json()
again = api.post("/api/v1/notifications/batch", {"items": items}, format="json").json()
rows = Notification.objects.prefetch_related("state_changes")
one_instant = sum(n.created_at == n.updated_at == n.queued_at == n.state_changes.all()[0].at for n in rows)
print("RESULT" + json.dumps([first["accepted"], again["duplicates"], Notification.objects.count(), one_instant]))
"""


def test_the_embedded_default_sqlite_takes_a_batch(tmp_path):
    result = run_embedded(tmp_path, EMBEDDED)
    # Each row created, queued and given its first history at the one instant of its acceptance.
    assert result == [300, 300, 300, 300]


def test_a_row_is_created_queued_and_given_its_history_at_one_instant(api, customers):
    results = post_batch(api, [shipped(user, n) for n, user in enumerate(customers[:3])]).json()["results"]
    for result in results:
        body = result["body"]
        assert body["created_at"] == body["queued_at"] == body["state_history"][0]["at"], body
    stored = Notification.objects.values_list("created_at", "updated_at", "queued_at")
    assert all(created == updated == queued for created, updated, queued in stored)


def test_the_rate_limits_count_a_batch_as_they_count_single_sends(api, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 3}}}
    items = [shipped("u-en-1", n) for n in range(5)]
    results = post_batch(api, items).json()["results"]
    assert [(r["body"]["state"], r["body"]["reason"]) for r in results] == [("queued", "")] * 3 + [
        ("suppressed", "rate-limited")
    ] * 2


def test_plain_items_are_read_and_answered_without_drf_field_by_field(api, customers, monkeypatch):
    """DRF's per-item validation and representation were two thirds of a batch's CPU (README "Throughput")."""
    calls = {"read": 0, "answer": 0}
    read, answer = BatchItemSerializer.run_validation, AcceptedSerializer.to_representation

    def counting(name, method):
        def wrapper(self, *args, **kwargs):
            calls[name] += 1
            return method(self, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(BatchItemSerializer, "run_validation", counting("read", read))
    monkeypatch.setattr(AcceptedSerializer, "to_representation", counting("answer", answer))
    items = [shipped(user, n) for n, user in enumerate(customers[:200])]
    items[5] = {**items[5], "channel": "email", "priority": "standard", "params": {"order": "5", "note": None}}
    items[6] = {**items[6], "kind": " shipped"}  # the serializer trims it: not plain, so the serializer reads it

    first, again = post_batch(api, items).json(), post_batch(api, items).json()

    assert (first["accepted"], again["duplicates"]) == (200, 200)
    assert calls == {"read": 2, "answer": 0}


# Items of every shape: the plain ones and the ones a fast path must leave to the serializer.
PLAIN_ITEMS = [
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped"},
    {"idempotency_key": "  k  ", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1", "x": [1, None]}},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "channel": None, "priority": None,
     "send_at": None},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "otp-code_2", "channel": "sms", "priority": "high"},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped\n"},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": 5},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "k" * 65},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "sh ipped"},
    {"idempotency_key": "k", "user_id": " u-ar-1", "kind": "shipped"},
    {"idempotency_key": "k", "user_id": "", "kind": "shipped"},
    {"idempotency_key": "k", "user_id": "u" * 129, "kind": "shipped"},
    {"idempotency_key": "k", "user_id": 7, "kind": "shipped"},
    {"idempotency_key": 7, "user_id": "u-ar-1", "kind": "shipped"},
    {"idempotency_key": "", "user_id": "u-ar-1", "kind": "shipped"},
    {"idempotency_key": " " + "k" * 255 + " ", "user_id": "u-ar-1", "kind": "shipped"},
    {"idempotency_key": "k" * 256, "user_id": "u-ar-1", "kind": "shipped"},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "channel": ""},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "channel": "fax"},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "priority": "urgent"},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "params": None},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "params": ["order"]},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "params": {"x": "y" * 17000}},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "send_at": "2026-12-01T09:00:00Z"},
    {"idempotency_key": "k", "user_id": "u-ar-1", "kind": "shipped", "colour": "red"},
    {"user_id": "u-ar-1", "kind": "shipped"},
]  # fmt: skip


# What the batch reads for each item, and the single send for its body (an item without its key).
PLAIN_READERS = [
    pytest.param(BatchItemSerializer, plain_send.plainly_valid_item, "", id="batch item"),
    pytest.param(SendRequestSerializer, plain_send.plainly_valid, "idempotency_key", id="single send"),
]


@pytest.mark.parametrize("item", PLAIN_ITEMS)
@pytest.mark.parametrize(("serializer", "read_plainly", "header_field"), PLAIN_READERS)
def test_a_send_read_plainly_is_read_as_its_serializer_reads_it(item, serializer, read_plainly, header_field):
    body = {name: value for name, value in item.items() if name != header_field}
    try:
        expected = dict(serializer().run_validation(body))
    except ValidationError:
        expected = None
    plain = read_plainly(body)
    assert plain is None or plain == expected
    if expected is not None and "send_at" not in body and body["kind"] in ("shipped", "otp-code_2"):
        assert plain == expected  # the plain shapes take the fast way


def test_an_answer_is_what_the_single_send_serializer_writes(api, send, settings):
    """``answers.accepted_dict`` against ``AcceptedSerializer`` for new, sent, scheduled and suppressed rows."""
    settings.TIME_ZONE = "Asia/Riyadh"  # DRF writes each moment in the current time zone
    queued = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}}, key="a").json()["id"]
    later = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "2"},
                  "send_at": "2026-12-24T09:00:00+01:00"}, key="b").json()["id"]  # fmt: skip
    Recipient.objects.create(user_id="no-address")
    suppressed = send({"user_id": "no-address", "kind": "shipped", "params": {"order": "3"}}, key="c").json()["id"]
    sent = Notification.objects.get(pk=queued)
    Attempt.objects.create(notification=sent, number=1, provider="smtp", started_at=sent.created_at, latency_ms=9,
                           result="sent", provider_ref="<r@x>", cost=Decimal("0.04500"), currency="USD")  # fmt: skip
    Notification.objects.filter(pk=queued).update(state="sent", provider="smtp", attempt_count=1,
                                                  sent_at=sent.created_at)  # fmt: skip

    for pk in (queued, later, suppressed):
        notification = (
            Notification.objects.select_related("recipient", "kind", "template_version__kind")
            .prefetch_related("state_changes", "attempts")
            .get(pk=pk)
        )
        notification.duplicate = True
        history, attempts = list(notification.state_changes.all()), list(notification.attempts.all())
        assert json.dumps(answers.accepted_dict(notification, history, attempts, True)) == json.dumps(
            AcceptedSerializer(notification).data
        )


def test_a_moment_is_written_in_the_zone_asked_whatever_was_written_before():
    """``answers.moment`` remembers what it wrote: one instant in two zones, or given in two offsets, stays apart."""
    riyadh, utc = zoneinfo.ZoneInfo("Asia/Riyadh"), zoneinfo.ZoneInfo("UTC")
    instant = datetime(2026, 12, 2, 9, 30, 15, 123456, tzinfo=utc)
    cases = [
        (instant, utc, "2026-12-02T09:30:15.123456Z"),
        (instant, riyadh, "2026-12-02T12:30:15.123456+03:00"),
        (instant.astimezone(riyadh), utc, "2026-12-02T09:30:15.123456Z"),
        (instant.astimezone(riyadh), riyadh, "2026-12-02T12:30:15.123456+03:00"),
        (instant, utc, "2026-12-02T09:30:15.123456Z"),
    ]
    assert [answers.moment(value, zone) for value, zone, _ in cases] == [text for _, _, text in cases]
    assert answers.moment(None, riyadh) is None


@pytest.mark.parametrize("first", [0, 1])
def test_the_two_readings_of_a_wall_clock_time_in_a_dst_fold_are_written_apart(first):
    """01:30 on 2027-11-07 in New York happens twice, an hour apart: equal as datetimes, never as answers."""
    new_york = zoneinfo.ZoneInfo("America/New_York")
    utc = zoneinfo.ZoneInfo("UTC")
    edt = datetime(2027, 11, 7, 5, 30, tzinfo=utc).astimezone(new_york)
    est = datetime(2027, 11, 7, 6, 30, tzinfo=utc).astimezone(new_york)
    assert (edt == est, edt.fold, est.fold) == (True, 0, 1)  # the trap: equal, and hashed alike
    readings = [(edt, "2027-11-07T01:30:00-04:00", "2027-11-07T05:30:00Z"),
                (est, "2027-11-07T01:30:00-05:00", "2027-11-07T06:30:00Z")]  # fmt: skip
    order = readings if first == 0 else readings[::-1]
    for _ in range(2):
        for value, local, in_utc in order:
            assert (answers.moment(value, new_york), answers.moment(value, utc)) == (local, in_utc)


def test_a_batch_marks_its_keys_seen_in_one_redis_command(
    api, orders_service, customers, monkeypatch, django_capture_on_commit_callbacks
):
    """The single send then finds their originals (idempotency.first_sighting); redis-py packed 1,000 SETs before."""
    queued, stage = [], Pipeline.pipeline_execute_command

    def spy(self, *args, **options):
        queued.append(args[0])
        return stage(self, *args, **options)

    monkeypatch.setattr(Pipeline, "pipeline_execute_command", spy)
    with django_capture_on_commit_callbacks(execute=True):
        response = post_batch(api, [shipped(user, n) for n, user in enumerate(customers[:300])])
    monkeypatch.undo()

    assert response.json()["accepted"] == 300
    assert "SET" not in queued
    scope = actions.scope_of(orders_service[0])
    assert not idempotency.first_sighting(scope, "order-0-shipped")
    assert not idempotency.first_sighting(scope, "order-299-shipped")


def test_a_duplicate_redis_forgot_never_counts_against_its_users_rate_limit(
    api, orders_service, settings, django_capture_on_commit_callbacks
):
    """Every key is read back, not only those the Redis fast path has seen: a duplicate whose Redis key expired
    (its TTL) or was lost (a restart) met the policy first and took a place in the user's rate limit."""
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 2}}}
    with django_capture_on_commit_callbacks(execute=True):  # the key is marked seen once committed
        assert post_batch(api, [shipped("u-en-1", 1)]).json()["accepted"] == 1
    forgotten = idempotency._cache_key(actions.scope_of(orders_service[0]), "order-1-shipped")
    assert HUEYS["high"].storage.conn.delete(forgotten) == 1  # that key only: the rate-limit windows stay

    again = post_batch(api, [shipped("u-en-1", 1), shipped("u-en-1", 2)]).json()["results"]

    assert [(r["status"], r["body"]["state"], r["body"]["reason"]) for r in again] == [
        (200, "queued", ""), (202, "queued", "")
    ]  # fmt: skip


def test_a_batch_the_database_failed_to_store_keeps_no_place_in_the_rate_limits(api, settings, monkeypatch):
    """The 503 says to send the batch again: its users' windows must not be taken by the failed attempt."""
    from importlib import import_module

    from django.db import OperationalError

    accept_batch = import_module(
        "backend.notifications.actions.accept_batch"
    )  # the module: the package exports the function

    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}}
    stored = accept_batch.insert_accepted

    def lost_connection(rows, now):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(accept_batch, "insert_accepted", lost_connection)
    items = [shipped("u-en-1", 1), shipped("u-ar-1", 2)]
    assert post_batch(api, items).status_code == 503
    monkeypatch.setattr(accept_batch, "insert_accepted", stored)

    again = post_batch(api, items).json()["results"]
    assert [(r["status"], r["body"]["state"], r["body"]["reason"]) for r in again] == [(202, "queued", "")] * 2


def test_a_key_redis_forgot_is_still_answered_as_its_duplicate(api, orders_service, customers):
    """Redis lost its keys (restarted empty, or past the TTL): the INSERT skips the row and its original answers."""
    first = post_batch(api, [shipped(customers[0], 0)]).json()["results"][0]["body"]
    HUEYS["high"].storage.conn.flushdb()

    again = post_batch(api, [shipped(customers[0], 0), {**shipped(customers[1], 0), "params": {"order": "9"}}]).json()

    assert [r["status"] for r in again["results"]] == [200, 422]
    assert again["results"][0]["body"]["id"] == first["id"]
    conflict = "'order-0-shipped' was already used for a different request; use a new key for a new event."
    assert again["results"][1]["body"]["fields"] == {"idempotency_key": [conflict]}
    assert Notification.objects.count() == 1


def test_seen_keys_are_read_by_the_whole_index_key_whatever_the_statistics_say(api, orders_service, customers):
    """Statistics taken while the client had sent little; then 20,000 rows of its own: each key is one index lookup."""
    post_batch(api, [shipped(user, n) for n, user in enumerate(customers[:200])])
    analyze()
    first = Notification.objects.get(idempotency_key="order-0-shipped")
    copies_in_sql(first, 20_000, "old")

    with CaptureQueriesContext(connection) as queries:
        body = post_batch(api, [shipped(user, n) for n, user in enumerate(customers[:200])]).json()

    assert body["duplicates"] == 200
    (read,) = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT") and "-shipped" in q["sql"]]
    plan = plan_of(read)
    # Before: "Index Cond: (idempotency_scope = 'client:…')" alone, all 20,200 rows of the scope read and hashed.
    assert "idempotency_key)::text = k.key" in plan, plan
    assert "Hash Join" not in plan and "Seq Scan on notifications_notification" not in plan, plan


def test_the_collector_rests_while_a_batch_is_accepted_and_runs_after(api, monkeypatch):
    """Its young passes walked the batch's objects again and again (README "Throughput: the send API")."""
    seen, accept = [], actions.accept_batch

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return accept(*args, **kwargs)

    monkeypatch.setattr(actions, "accept_batch", spy)
    assert post_batch(api, [shipped("u-ar-1", 1)]).status_code == 200
    assert seen == [False]
    assert gc.isenabled()
