"""Fifty callers racing with one idempotency key, over real HTTP (daphne) against PostgreSQL."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from backend.notifications.models import Notification, StateChange
from tests.processes import Processes, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

CALLERS = 50


@pytest.fixture
def web(smtp_sink):
    processes = Processes(worker_env(smtp_sink.port))
    yield processes.start_web()
    processes.stop_all()


def test_fifty_concurrent_posts_with_one_key_make_one_notification(web, orders_service):
    _, key = orders_service
    barrier = threading.Barrier(CALLERS)
    body = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}

    def post(_):
        with requests.Session() as session:
            barrier.wait()
            return session.post(
                f"{web}/api/v1/notifications",
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


def test_racing_accepts_fall_back_on_the_unique_constraint(orders_service, settings):
    """Twenty threads call the action at once: most lose the race inside PostgreSQL, not in Redis.

    Those the policy counted before their INSERT lost give their place in the user's rate limit back.
    """
    from django.db import connection

    from backend.notifications import actions, rate_limits

    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"transactional": {"h": 100}}}

    request = actions.SendRequest(
        idempotency_key="order-6000-shipped", user_id="u-en-1", kind="shipped", params={"order": "6000"},
        channel=None, priority=None, send_at=None,
    )  # fmt: skip
    threads = 20
    barrier = threading.Barrier(threads)

    def accept(_):
        try:
            barrier.wait()
            return actions.accept(request, client=orders_service[0])
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(accept, range(threads)))

    [notification] = Notification.objects.all()
    assert {r.notification.pk for r in results} == {notification.pk}
    assert sorted(r.duplicate for r in results) == [False] + [True] * (threads - 1)
    assert rate_limits.count(f"rate:{notification.recipient_id}:transactional:h", 3600) == 1
