"""What one API client may send (its kinds) and how fast (its own token bucket): DESIGN.md §2-3, api/caller_rate.py."""

import pytest
import redis
from rest_framework.test import APIClient

from backend.notifications.api import caller_rate
from backend.notifications.delivery import budget, shared_state
from backend.notifications.models import ApiClient, Kind, Notification, Recipient, TemplateVersion
from backend.stubs.smtp_sink import free_port

pytestmark = pytest.mark.usefixtures("demo_data")

SHIPPED = {"user_id": "u-en-1", "kind": "shipped", "params": {"order": "5012"}}
OTP = {"user_id": "u-en-1", "kind": "otp", "params": {"code": "123456"}}


def restricted(orders_service, *kinds: str) -> ApiClient:
    client = orders_service[0]
    client.every_kind = False
    client.save()
    client.allowed_kinds.set(Kind.objects.filter(name__in=kinds))
    return client


def post_batch(api, items: list):
    return api.post("/api/v1/notifications/batch", {"items": items}, format="json")


def test_a_client_limited_to_its_kinds_is_refused_the_others_with_a_422(api, send, orders_service):
    restricted(orders_service, "shipped")
    refused = send(OTP, key="login-1")
    assert refused.status_code == 422
    assert refused.json()["fields"] == {
        "kind": ["this API client may not send otp: ask an administrator to add it to the client's kinds"]
    }
    assert send(SHIPPED, key="order-5012-shipped").status_code == 202
    assert list(Notification.objects.values_list("kind__name", flat=True)) == ["shipped"]


def test_a_batch_refuses_only_the_items_of_kinds_the_client_may_not_send(api, orders_service):
    restricted(orders_service, "shipped")
    response = post_batch(
        api, [{**SHIPPED, "idempotency_key": "a"}, {**OTP, "idempotency_key": "b"}, {**SHIPPED, "idempotency_key": "c"}]
    )
    assert response.status_code == 200
    assert [result["status"] for result in response.json()["results"]] == [202, 422, 202]
    assert response.json()["results"][1]["body"]["fields"]["kind"][0].startswith("this API client may not send otp")


def test_a_kind_added_in_the_admin_counts_from_the_next_request(api, send, orders_service):
    client = restricted(orders_service, "shipped")
    assert send(OTP, key="login-1").status_code == 422  # the key cache now holds the restricted client
    client.allowed_kinds.add(Kind.objects.get(name="otp"))
    assert send(OTP, key="login-1").status_code == 202


def test_a_client_with_no_kind_and_not_every_kind_may_send_nothing(api, send, orders_service):
    restricted(orders_service)
    assert send(SHIPPED, key="order-5012-shipped").status_code == 422
    assert not Notification.objects.exists()


def test_a_security_kind_campaign_is_refused_by_the_campaign_rule_whatever_the_clients_kinds(api, orders_service):
    restricted(orders_service, "shipped")
    body = {"name": "Codes", "kind": "otp", "channel": "sms", "user_ids": ["u-en-1"], "params": {"code": "1"},
            "schedule": {"mode": "now"}, "correction": {"none_reason": "none"}}  # fmt: skip
    response = api.post("/api/v1/campaigns", body, format="json", HTTP_IDEMPOTENCY_KEY="codes")
    assert response.status_code == 422
    assert response.json()["fields"]["kind"] == ["otp: security kinds cannot be sent as a campaign"]


def test_a_campaign_of_a_kind_the_client_may_not_send_is_refused(api, orders_service):
    restricted(orders_service, "shipped")
    body = {
        "name": "Weekend sale", "kind": "promo", "channel": "email", "user_ids": ["u-en-1"],
        "params": {"percent": "20"}, "schedule": {"mode": "now"},
        "correction": {"none_reason": "A price correction goes out as a new campaign."},
    }  # fmt: skip
    response = api.post("/api/v1/campaigns", body, format="json", HTTP_IDEMPOTENCY_KEY="sale")
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "kind": ["This API client may not send promo: ask an administrator to add it to the client's kinds."]
    }


def test_a_campaigns_correction_of_a_kind_the_client_may_not_send_is_refused(api, orders_service):
    """The staff's "send correction" would later send that kind: refused when the campaign is made."""
    restricted(orders_service, "promo")
    digest = TemplateVersion.objects.filter(kind__name="digest", channel="email", status="approved").first()
    body = {
        "name": "Weekend sale", "kind": "promo", "channel": "email", "user_ids": ["u-en-1"],
        "params": {"percent": "20"}, "schedule": {"mode": "now"}, "correction": {"template_version": digest.pk},
    }  # fmt: skip
    response = api.post("/api/v1/campaigns", body, format="json", HTTP_IDEMPOTENCY_KEY="sale")
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "correction.template_version": [
            "This API client may not send digest: ask an administrator to add it to the client's kinds."
        ]
    }


@pytest.fixture
def customers() -> list[str]:
    users = [Recipient(user_id=f"c-{n}", email=f"c{n}@example.com", language="en") for n in range(20)]
    Recipient.objects.bulk_create(users)
    return [user.user_id for user in users]


def shipped_to(users: list[str], prefix: str) -> list[dict]:
    return [{**SHIPPED, "user_id": user, "idempotency_key": f"{prefix}-{user}"} for user in users]


def test_a_client_over_its_rate_gets_a_429_and_nothing_of_the_request_is_stored(
    api, send, orders_service, customers, settings
):
    # 1 a second, a bucket of 10: the second batch of 10 needs ten seconds of refill, the test takes far less.
    client = orders_service[0]
    client.rate_limit = 1
    client.save()
    settings.NOTIFY = {**settings.NOTIFY, "API_CLIENT_BURST_SECONDS": 10.0}
    assert caller_rate.rate_of(client) == (1.0, 10.0)
    first = post_batch(api, shipped_to(customers[:10], "first"))
    assert (first.status_code, first.json()["accepted"]) == (200, 10)

    refused = post_batch(api, shipped_to(customers[10:], "second"))
    assert refused.status_code == 429
    assert refused.json()["error"] == "rate_limited"
    assert refused.json()["message"].startswith(
        "This API client may submit 1 notifications a second and is over it: nothing was accepted"
    )
    assert 1 <= int(refused["Retry-After"]) <= 10
    assert Notification.objects.count() == 10

    single = send({**SHIPPED, "user_id": customers[19]}, key="single")
    assert single.status_code == 429
    assert Notification.objects.count() == 10


def test_a_batch_larger_than_the_bucket_is_a_413_told_to_split_without_a_retry_after(api, orders_service, customers):
    client = orders_service[0]
    client.rate_limit = 2  # a bucket of 4 at the default 2 seconds
    client.save()
    response = post_batch(api, shipped_to(customers[:5], "big"))
    assert (response.status_code, response.json()["error"]) == (413, "batch_over_burst")
    assert response.json()["message"] == (
        "This API client may submit 2 notifications a second, at most 4 at once: a batch of 5 can never pass. "
        "Send at most 4 items a request."
    )
    assert "Retry-After" not in response
    assert post_batch(api, shipped_to(customers[:4], "fits")).json()["accepted"] == 4


def test_each_client_has_its_own_bucket(api, send, orders_service, customers):
    client = orders_service[0]
    client.rate_limit = 1
    client.save()
    assert send(SHIPPED, key="one").status_code == 202
    assert send(SHIPPED, key="two").status_code == 202  # the bucket holds 2 seconds' worth
    assert send(SHIPPED, key="three").status_code == 429
    _, key = ApiClient.issue("billing")
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    answer = other.post("/api/v1/notifications", SHIPPED, format="json", HTTP_IDEMPOTENCY_KEY="one")
    assert answer.status_code == 202


def test_the_bucket_is_shared_through_redis(api, send, orders_service):
    client = orders_service[0]
    client.rate_limit = 1
    client.save()
    assert send(SHIPPED, key="one").status_code == 202
    tokens = shared_state.redis_client().hget(f"api-rate:{client.pk}", "tokens")
    assert 1.0 <= float(tokens) < 1.5  # 2 held, 1 taken, a little refilled since


def test_without_redis_the_limit_fails_open(api, send, orders_service, settings):
    client = orders_service[0]
    client.rate_limit = 1
    client.save()
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    shared_state.reset()
    try:
        with pytest.raises(redis.ConnectionError):
            shared_state.redis_client().ping()
        for _ in range(3):
            caller_rate.take(client)  # a third take would be refused by a live bucket of 2
    finally:
        shared_state.reset()


def test_on_the_embedded_default_each_process_keeps_the_bucket(orders_service, settings):
    client = orders_service[0]
    client.rate_limit = 1
    settings.REDIS_URL = ""
    caller_rate.reset()
    caller_rate.take(client, 2)
    with pytest.raises(caller_rate.Throttled) as refused:
        caller_rate.take(client)
    assert refused.value.wait == 1
    caller_rate.reset()


def test_a_redis_that_answers_but_refuses_fails_open_too(api, send, orders_service, monkeypatch):
    """A read-only replica after a failover, or OOM under noeviction: logged, never a 500."""

    class Refusing:
        def eval(self, *args):
            raise redis.ReadOnlyError("You can't write against a read only replica.")

    monkeypatch.setattr(budget, "redis_client", Refusing)
    try:
        assert send(SHIPPED, key="order-5012-shipped").status_code == 202
    finally:
        shared_state.reset()
