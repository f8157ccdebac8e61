"""Fifty callers racing with one idempotency key, over real HTTP against PostgreSQL."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from backend.notifications.models import Notification, StateChange

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

CALLERS = 50


def test_fifty_concurrent_posts_with_one_key_make_one_notification(live_server, orders_service):
    _, key = orders_service
    barrier = threading.Barrier(CALLERS)
    body = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}

    def post(_):
        with requests.Session() as session:
            barrier.wait()
            return session.post(
                f"{live_server.url}/api/v1/notifications",
                json=body,
                headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "order-5012-shipped"},
                timeout=60,
            )

    with ThreadPoolExecutor(max_workers=CALLERS) as pool:
        responses = list(pool.map(post, range(CALLERS)))

    [notification] = Notification.objects.all()
    assert sorted(r.status_code for r in responses) == [200] * (CALLERS - 1) + [202]
    assert {r.json()["id"] for r in responses} == {str(notification.pk)}
    assert sum(r.json()["duplicate"] for r in responses) == CALLERS - 1
    assert StateChange.objects.count() == 1
