"""Accept while Redis is unreachable: each Redis use fails in its documented direction, never as a 500.

Redis is "down" here for real: every client (the cache, the shared client,
the tier's Huey queue) points at a loopback port nobody listens on, so each
call meets a refused connection. The processes test
(test_outage_processes.py) stops a real Redis in the middle of a burst.
"""

from datetime import timedelta

import pytest
import redis
from django.core.cache import caches

from backend.notifications.delivery import shared_state
from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Kind, Notification, State
from backend.notifications.queues import HUEYS
from backend.stubs.smtp_sink import free_port
from tests.conftest import pending

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def redis_down(settings, monkeypatch):
    """Every Redis client of this process points at a closed port; ``restore()`` brings Redis back."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    live = settings.REDIS_URL
    settings.REDIS_URL = dead
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": dead}}
    for tier in HUEYS:
        monkeypatch.setattr(HUEYS[tier].storage, "conn", redis.Redis.from_url(dead))
    shared_state.reset()

    class Outage:
        @staticmethod
        def restore() -> None:
            settings.REDIS_URL = live
            settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": live}}
            monkeypatch.undo()
            shared_state.reset()

    yield Outage()
    caches["default"].close()
    shared_state.reset()


def shipped(send, order: str):
    return send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": order}}, key=f"order-{order}-shipped")


def test_a_send_is_accepted_and_left_queued_for_the_sweeper(
    send, redis_down, settings, caplog, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = shipped(send, "5012")

    assert response.status_code == 202, response.content
    notification = Notification.objects.get(pk=response.json()["id"])
    assert notification.state == State.QUEUED
    assert "left queued for the sweeper" in caplog.text

    redis_down.restore()
    assert pending("standard") == 0  # the task was never enqueued
    timeout = settings.NOTIFY["VISIBILITY_TIMEOUT"]
    later = notification.queued_at + timedelta(seconds=timeout + 1)
    assert sweep(later).stale_queued == 1
    assert pending("standard") == 1


def test_a_repeated_key_during_an_outage_gets_the_original_from_postgresql(send, redis_down):
    first = shipped(send, "5012")
    again = shipped(send, "5012")

    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["duplicate"] is True
    assert Notification.objects.count() == 1


def test_an_otp_whose_per_phone_limit_cannot_be_checked_is_refused_with_503(send, redis_down):
    response = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1")

    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json() == {
        "error": "unavailable",
        "message": "The per-phone OTP limit cannot be checked right now (Redis is unreachable), so the code "
        "was not sent. Nothing was stored: retry with the same Idempotency-Key after 2 seconds.",
    }
    assert not Notification.objects.exists()


def test_the_otp_is_accepted_when_the_caller_retries_after_redis_returns(send, redis_down):
    body = {"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}
    assert send(body, key="login-1").status_code == 503
    redis_down.restore()
    response = send(body, key="login-1")
    assert (response.status_code, response.json()["state"]) == (202, "queued")


def test_marketing_rate_limits_fail_open(send, redis_down, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1}}}
    Kind.objects.filter(name="promo").update(over_limit="suppress")
    responses = [
        send({"user_id": "u-en-1", "kind": "promo", "params": {"percent": str(n)}}, key=f"promo-{n}") for n in range(3)
    ]
    assert [(r.status_code, r.json()["state"]) for r in responses] == [(202, "queued")] * 3


def test_after_a_refused_connection_redis_is_skipped_for_a_moment(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(shared_state, "_now", lambda: clock[0])
    shared_state.reset()
    with pytest.raises(shared_state.RedisUnavailable), shared_state.guard("a test"):
        raise redis.ConnectionError("Connection refused")

    calls = []
    with pytest.raises(shared_state.RedisUnavailable, match="skipped"), shared_state.guard("a test"):
        calls.append("redis")
    clock[0] += shared_state.DOWN_MEMO_SECONDS
    with shared_state.guard("a test"):
        calls.append("redis")
    assert calls == ["redis"]


def test_redis_clients_give_up_within_the_configured_timeouts(settings):
    client = shared_state.redis_client()
    options = client.connection_pool.connection_kwargs
    assert (options["socket_connect_timeout"], options["socket_timeout"]) == (
        settings.REDIS_CONNECT_TIMEOUT,
        settings.REDIS_SOCKET_TIMEOUT,
    )
    huey_options = HUEYS["high"].storage.pool.connection_kwargs
    assert huey_options["socket_connect_timeout"] == settings.REDIS_CONNECT_TIMEOUT
    # Huey's blocking pop waits up to its read timeout for a task: the socket must outlast it.
    assert huey_options["socket_timeout"] == HUEYS["high"].storage.read_timeout + settings.REDIS_SOCKET_TIMEOUT
    cache_options = caches["default"]._cache._pool_options
    assert (cache_options["socket_connect_timeout"], cache_options["socket_timeout"]) == (
        settings.REDIS_CONNECT_TIMEOUT,
        settings.REDIS_SOCKET_TIMEOUT,
    )
    # One immediate retry on a new connection (a Redis restart closed the pooled ones), none for timeouts.
    retry = options["retry"]
    assert (retry.get_retries(), retry._supported_errors) == (1, (redis.ConnectionError,))


def test_readiness_checks_the_database_and_redis(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "checks": {"database": "ok", "redis": "ok"}}


def test_readiness_fails_while_redis_is_unreachable_and_liveness_holds(client, redis_down):
    assert client.get("/healthz").status_code == 200
    response = client.get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["database"] == "ok"
    assert checks["redis"].startswith("down: ConnectionError")


def test_a_send_the_provider_accepted_is_recorded_sent_when_redis_dies_during_the_call(send, settings, monkeypatch):
    """Bulkhead release, sent-marker and breaker bookkeeping come after the call: none may fail the status write."""
    from backend.notifications.delivery import dispatch
    from backend.notifications.providers.fake import FakeSmsProvider

    pk = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1").json()["id"]
    accept_call = FakeSmsProvider.send

    def redis_dies_meanwhile(provider, message):
        settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
        return accept_call(provider, message)

    monkeypatch.setattr(FakeSmsProvider, "send", redis_dies_meanwhile)
    dispatch.deliver(pk)

    notification = Notification.objects.get(pk=pk)
    assert (notification.state, notification.provider) == (State.SENT, "fake-sms")
    assert list(notification.attempts.values_list("result", flat=True)) == ["sent"]


def test_the_velocity_alarm_fails_open(redis_down):
    from backend.notifications import policy
    from backend.notifications.models import Recipient, VelocityAlarm

    policy._watch_velocity(Recipient.objects.get(user_id="u-ar-1"), 1_000_000.0)
    assert not VelocityAlarm.objects.exists()


def test_a_batch_without_redis_answers_its_stored_keys_as_duplicates_and_stores_the_others(api, redis_down):
    """The originals come from PostgreSQL, the UNIQUE index decides; nothing is marked seen, nothing fails."""

    def batch(orders):
        items = [{"idempotency_key": f"order-{order}-shipped", "user_id": "u-en-1", "kind": "shipped",
                  "params": {"order": str(order)}} for order in orders]  # fmt: skip
        return api.post("/api/v1/notifications/batch", {"items": items}, format="json").json()

    first = batch(range(3))
    again = batch(range(6))

    assert (first["accepted"], again["accepted"], again["duplicates"], again["errors"]) == (3, 3, 3, 0)
    assert [r["body"]["id"] for r in again["results"][:3]] == [r["body"]["id"] for r in first["results"]]
    assert Notification.objects.count() == 6


@pytest.mark.parametrize("refusal", [redis.ReadOnlyError, redis.exceptions.OutOfMemoryError])
def test_a_redis_that_answers_but_refuses_writes_is_an_outage_too(send, monkeypatch, refusal):
    """A read-only replica after a failover, OOM under noeviction: a send is a 202 and an OTP the documented 503."""

    def refuse(self, *args, **options):
        raise refusal("READONLY You can't write against a read only replica.")

    monkeypatch.setattr(redis.Redis, "execute_command", refuse)
    shared_state.reset()
    try:
        accepted = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}, key="order-5012")
        code = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1")
    finally:
        shared_state.reset()
    assert (accepted.status_code, accepted.json()["state"]) == (202, "queued")
    assert (code.status_code, code.json()["error"]) == (503, "unavailable")
