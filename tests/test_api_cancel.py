"""POST /api/v1/notifications/{id}/cancel: scheduled or queued and never handed to a provider → cancelled."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from backend.notifications import actions
from backend.notifications.actions.cancel import cancel
from backend.notifications.delivery.dispatch import deliver
from backend.notifications.models import ApiClient, Notification
from inbox.models import InboxMessage

pytestmark = pytest.mark.usefixtures("demo_data")

LATER = (timezone.now() + timedelta(days=1)).isoformat()
SHIPPED = {"user_id": "u-en-1", "kind": "shipped", "channel": "inapp", "params": {"order": "5012"}}


def cancel_url(pk: str) -> str:
    return f"/api/v1/notifications/{pk}/cancel"


def test_a_scheduled_notification_ends_cancelled(api, send):
    pk = send({**SHIPPED, "send_at": LATER}).json()["id"]
    response = api.post(cancel_url(pk))
    assert response.status_code == 200
    body = response.json()
    assert (body["id"], body["state"], body["reason"]) == (pk, "cancelled", "cancelled-by-caller")
    assert [(c["from_state"], c["to_state"]) for c in body["state_history"]] == [
        ("", "scheduled"),
        ("scheduled", "cancelled"),
    ]
    assert Notification.objects.get(pk=pk).state == "cancelled"


def test_a_queued_notification_ends_cancelled_and_its_task_then_does_nothing(api, send):
    pk = send(SHIPPED).json()["id"]
    assert api.post(cancel_url(pk)).json()["state"] == "cancelled"
    deliver(pk)  # the task still waiting in the queue
    assert Notification.objects.get(pk=pk).state == "cancelled"
    assert not InboxMessage.objects.filter(notification_id=pk).exists()


def test_a_sent_notification_is_409_with_its_state(api, send):
    pk = send(SHIPPED).json()["id"]
    deliver(pk)
    response = api.post(cancel_url(pk))
    assert response.status_code == 409
    assert response.json() == {
        "error": "not_cancellable",
        "message": "The notification cannot be cancelled: it is sent.",
        "state": "sent",
    }


def test_one_a_worker_claimed_first_is_409_sending(api, send):
    pk = send(SHIPPED).json()["id"]
    assert actions.claim(Notification.objects.get(pk=pk))
    response = api.post(cancel_url(pk))
    assert (response.status_code, response.json()["state"]) == (409, "sending")


def test_a_claim_after_the_cancel_moves_nothing(api, send):
    pk = send(SHIPPED).json()["id"]
    stale = Notification.objects.get(pk=pk)  # what a worker read before the cancel
    cancel(Notification.objects.get(pk=pk))
    assert actions.claim(stale) is False
    assert Notification.objects.get(pk=pk).state == "cancelled"


def test_a_queued_retry_that_a_provider_already_saw_is_409(api, send):
    pk = send(SHIPPED).json()["id"]
    Notification.objects.filter(pk=pk).update(attempt_count=1)
    response = api.post(cancel_url(pk))
    assert response.status_code == 409
    assert response.json()["message"] == (
        "The notification cannot be cancelled: it was already handed to a provider (1 attempt(s)) "
        "and is waiting for a retry."
    )
    assert response.json()["state"] == "queued"


def test_a_cancelled_otp_keeps_no_clear_code(api, send):
    body = {"user_id": "u-en-1", "kind": "otp", "params": {"code": "482913"}, "send_at": LATER}
    pk = send(body, key="login-1").json()["id"]
    api.post(cancel_url(pk))
    assert Notification.objects.get(pk=pk).params == {"code": "••••••"}


def test_another_clients_notification_is_404(api, send):
    pk = send(SHIPPED).json()["id"]
    _client, key = ApiClient.issue("billing")
    billing = APIClient()
    billing.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = billing.post(cancel_url(pk))
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": f"No notification with id {pk}."}
    assert Notification.objects.get(pk=pk).state == "queued"
