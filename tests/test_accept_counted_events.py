"""What the policy counted for a send is forgotten exactly when nothing was stored, and only then.

Transactional tests: the on-commit callbacks run where they run in production (at once after a single
send's autocommit INSERT, at the exit of a batch's transaction). Found by a reviewing helper.
"""

import sqlite3

import pytest
import redis
from django.db import OperationalError

from backend.notifications import rate_limits, tasks
from backend.notifications.models import Notification, Recipient, State, VelocityAlarm

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

SHIPPED = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}
OTP = {"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}}

# What an enqueue can raise besides an unreachable Redis: a replica after a failover, a full Redis
# (noeviction), and on the embedded default the Huey queue's SQLite file locked by a worker.
REFUSED_WRITES = [
    redis.exceptions.ReadOnlyError("You can't write against a read only replica."),
    redis.exceptions.ResponseError("OOM command not allowed when used memory > 'maxmemory'."),
    sqlite3.OperationalError("database is locked"),
]


def hour_count(user_id: str) -> int:
    pk = Recipient.objects.get(user_id=user_id).pk
    return rate_limits.count(f"rate:{pk}:transactional:h", 3600)


def failing(error: Exception):
    def fail(*args, **kwargs):
        raise error

    return fail


@pytest.mark.parametrize("error", REFUSED_WRITES, ids=lambda e: type(e).__name__)
def test_a_stored_send_whose_enqueue_fails_is_accepted_and_keeps_its_place(send, settings, monkeypatch, error):
    """The row is committed (the sweeper hands it over later): a 202, and the user's window stays taken."""
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}}
    monkeypatch.setattr(tasks, "enqueue_delivery", failing(error))

    response = send(SHIPPED)
    monkeypatch.undo()

    assert (response.status_code, response.json()["state"]) == (202, "queued")
    assert Notification.objects.get().state == State.QUEUED
    assert hour_count("u-ar-1") == 1
    over = send({**SHIPPED, "params": {"order": "5013"}}, key="order-5013-shipped").json()
    assert (over["state"], over["reason"]) == ("suppressed", "rate-limited")


@pytest.mark.parametrize("error", REFUSED_WRITES, ids=lambda e: type(e).__name__)
def test_a_stored_batch_whose_enqueue_fails_is_accepted_and_keeps_its_places(api, settings, monkeypatch, error):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}}
    monkeypatch.setattr(tasks, "enqueue_deliveries", failing(error))
    items = [{**SHIPPED, "user_id": user, "idempotency_key": f"b-{user}"} for user in ("u-ar-1", "u-en-1")]

    response = api.post("/api/v1/notifications/batch", {"items": items}, format="json")
    monkeypatch.undo()

    assert (response.status_code, response.json()["accepted"]) == (200, 2)
    assert (hour_count("u-ar-1"), hour_count("u-en-1")) == (1, 1)
    fresh = [{**item, "idempotency_key": item["idempotency_key"] + "-2"} for item in items]
    again = api.post("/api/v1/notifications/batch", {"items": fresh}, format="json").json()["results"]
    assert [(r["body"]["state"], r["body"]["reason"]) for r in again] == [("suppressed", "rate-limited")] * 2


def test_an_otp_whose_velocity_alarm_could_not_be_stored_keeps_no_place_in_its_phones_limit(
    send, settings, monkeypatch
):
    """The OTP was counted, then the alarm's INSERT met the database down: a 503 that says to retry."""
    settings.NOTIFY = {**settings.NOTIFY, "OTP_LIMIT": 1, "OTP_VELOCITY_PER_MINUTE": 0}
    monkeypatch.setattr(VelocityAlarm.objects, "create", failing(OperationalError("server closed the connection")))

    assert send(OTP, key="login-1").status_code == 503
    monkeypatch.undo()

    assert Notification.objects.count() == 0
    retry = send(OTP, key="login-1")
    assert (retry.status_code, retry.json()["state"], retry.json()["reason"]) == (202, "queued", "")


def test_a_batch_whose_otp_alarm_could_not_be_stored_keeps_no_place_in_any_limit(api, settings, monkeypatch):
    """decide_many counted every user's window first; the whole batch answers 503 and gives them all back."""
    settings.NOTIFY = {
        **settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}, "OTP_LIMIT": 1, "OTP_VELOCITY_PER_MINUTE": 0,
    }  # fmt: skip
    items = [{**SHIPPED, "user_id": "u-fa-1", "idempotency_key": "ship-fa"}, {**OTP, "idempotency_key": "login-en"}]
    monkeypatch.setattr(VelocityAlarm.objects, "create", failing(OperationalError("server closed the connection")))

    assert api.post("/api/v1/notifications/batch", {"items": items}, format="json").status_code == 503
    monkeypatch.undo()

    assert Notification.objects.count() == 0
    assert hour_count("u-fa-1") == 0
    again = api.post("/api/v1/notifications/batch", {"items": items}, format="json").json()["results"]
    assert [(r["status"], r["body"]["state"], r["body"]["reason"]) for r in again] == [(202, "queued", "")] * 2


def test_a_forget_redis_refuses_never_replaces_the_answer(send, orders_service, settings, monkeypatch):
    """A duplicate found at the INSERT still answers 200 when the windows cannot be written."""
    from importlib import import_module

    idempotency = import_module("backend.notifications.idempotency")
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 5}}}
    first = send(SHIPPED).json()
    monkeypatch.setattr(idempotency, "first_sighting", lambda scope, key: True)  # as if Redis forgot the key
    monkeypatch.setattr(rate_limits, "forget", failing(redis.exceptions.ReadOnlyError("read only replica")))

    again = send(SHIPPED)

    assert (again.status_code, again.json()["id"]) == (200, first["id"])


def test_a_batch_whose_first_otp_alarm_fails_gives_back_the_places_of_the_items_after_it(api, settings, monkeypatch):
    """hit_many counts every item's window before any decision: those after the failing one are given back too."""
    settings.NOTIFY = {
        **settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}, "OTP_LIMIT": 1, "OTP_VELOCITY_PER_MINUTE": 0,
    }  # fmt: skip
    items = [{**OTP, "idempotency_key": "login-en"}, {**SHIPPED, "user_id": "u-fa-1", "idempotency_key": "ship-fa"}]
    monkeypatch.setattr(VelocityAlarm.objects, "create", failing(OperationalError("server closed the connection")))

    assert api.post("/api/v1/notifications/batch", {"items": items}, format="json").status_code == 503
    monkeypatch.undo()

    assert (Notification.objects.count(), hour_count("u-fa-1")) == (0, 0)
    again = api.post("/api/v1/notifications/batch", {"items": items}, format="json").json()["results"]
    assert [(r["status"], r["body"]["state"], r["body"]["reason"]) for r in again] == [(202, "queued", "")] * 2


def test_decide_many_forgets_each_event_of_a_failed_batch_once_and_no_earlier_ones(settings, monkeypatch):
    from django.utils import timezone

    from backend.notifications import policy
    from backend.notifications.models import Kind

    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 5}}, "OTP_VELOCITY_PER_MINUTE": 0}

    def cases(*specs):
        out = []
        for user_id, kind_name in specs:
            kind, recipient = Kind.objects.get(name=kind_name), Recipient.objects.get(user_id=user_id)
            out.append(policy.Case(kind, recipient, policy.route(kind, recipient, None), kind.priority, None))
        return out

    now = timezone.now()
    earlier = policy.decide_many(cases(("u-fa-1", "shipped"), ("u-ar-1", "shipped")), now)  # stored before
    forgotten: list = []
    forget = rate_limits.forget
    monkeypatch.setattr(rate_limits, "forget", lambda events: (forgotten.extend(events), forget(events)))
    monkeypatch.setattr(VelocityAlarm.objects, "create", failing(OperationalError("server closed the connection")))

    with pytest.raises(OperationalError):
        policy.decide_many(cases(("u-fa-1", "shipped"), ("u-en-1", "otp"), ("u-ar-1", "shipped")), now)

    members = [event.member for event in forgotten]
    assert len(members) == len(set(members)) == 4  # two users' windows, the OTP's phone and its velocity count
    assert not {event.member for decision in earlier for event in decision.counted} & set(members)
    assert (hour_count("u-fa-1"), hour_count("u-ar-1")) == (1, 1)


def test_a_stored_batch_is_not_a_500_when_its_keys_cannot_be_marked_seen(api, settings, monkeypatch):
    """A Redis that refuses writes refuses mark_seen's too: the committed batch still answers 200."""
    from importlib import import_module

    idempotency = import_module("backend.notifications.idempotency")
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 1}}}
    refused = redis.exceptions.ReadOnlyError("You can't write against a read only replica.")
    monkeypatch.setattr(tasks, "enqueue_deliveries", failing(refused))
    monkeypatch.setattr(idempotency, "mark_seen", failing(refused))

    response = api.post(
        "/api/v1/notifications/batch", {"items": [{**SHIPPED, "idempotency_key": "b-1"}]}, format="json"
    )
    monkeypatch.undo()

    assert (response.status_code, Notification.objects.count(), hour_count("u-ar-1")) == (200, 1, 1)
