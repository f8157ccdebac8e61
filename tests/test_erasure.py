"""DELETE /api/v1/users/{user_id}: a user's record erased on request (backend/notifications/erasure.py)."""

import importlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from backend.notifications import erasure
from backend.notifications.api.errors import ERASED_MEANWHILE
from backend.notifications.delivery import dispatch
from backend.notifications.models import (
    Attempt,
    DeadLetter,
    Device,
    Erasure,
    Notification,
    Preference,
    Receipt,
    Recipient,
    State,
    StateChange,
    UnsubscribeToken,
)
from backend.support.models import ContactReveal
from backend.support.reveal import reveal
from campaigns.models import SegmentMember
from inbox.models import InboxMessage
from tests.campaigns_setup import list_segment

pytestmark = pytest.mark.usefixtures("demo_data")

URL = "/api/v1/users/{}"


@pytest.fixture
def layla(api, send) -> dict:
    """u-ar-1 with a history: a sent mail with its trail, a queued and a scheduled send, a second device, a preference,
    an inbox message, a segment membership, an unsubscribe link and a contact a support agent revealed."""
    recipient = Recipient.objects.get(user_id="u-ar-1")
    sent = Notification.objects.get(pk=send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}},
                                            key="order-1-shipped").json()["id"])  # fmt: skip
    now = timezone.now()
    Notification.objects.filter(pk=sent.pk).update(state=State.SENT)
    Attempt.objects.create(notification=sent, number=1, provider="smtp", started_at=now, result="sent")
    Receipt.objects.create(
        notification=sent, provider="smtp", provider_ref="r1", status="delivered", outcome="delivered"
    )
    DeadLetter.objects.create(notification=sent, attempts=5)
    queued = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "2"}}, key="order-2-shipped").json()
    later = (now + timedelta(days=1)).isoformat()
    scheduled = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "3"}, "send_at": later},
                     key="order-3-shipped").json()  # fmt: skip
    assert (queued["state"], scheduled["state"]) == ("queued", "scheduled")
    api.put("/api/v1/users/u-ar-1/devices", {"platform": "fcm", "token": "tok-layla"}, format="json")
    api.put("/api/v1/users/u-ar-1/preferences", {"channels": {"promo": {"email": False}}}, format="json")
    InboxMessage.objects.create(recipient=recipient, notification=sent, title="Your order", body="…")
    list_segment(["u-ar-1", "u-en-1"])
    UnsubscribeToken.objects.create(token="t-layla", recipient=recipient, kind="promo", channel="email")
    reveal(User.objects.get(username="support"), recipient, "phone", sent, reason="ticket 1")
    return {"recipient": recipient, "ids": [str(sent.pk), queued["id"], scheduled["id"]], "queued": queued["id"]}


def test_erasing_a_user_deletes_everything_held_about_them_and_answers_what_went(api, layla):
    others = Notification.objects.exclude(recipient=layla["recipient"]).count()
    response = api.delete(URL.format("u-ar-1"))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["user_id"] == "u-ar-1"
    assert body["erased"] == {"notifications": 3, "devices": 2, "preferences": 1, "inbox_messages": 1,
                              "segment_memberships": 1}  # fmt: skip

    pk = layla["recipient"].pk
    assert not Recipient.objects.filter(user_id="u-ar-1").exists()
    assert not Notification.objects.filter(pk__in=layla["ids"]).exists()
    for model in (StateChange, Attempt, Receipt, DeadLetter):
        assert not model.objects.filter(notification_id__in=layla["ids"]).exists(), model.__name__
    for model in (Device, Preference, InboxMessage, SegmentMember, UnsubscribeToken):
        assert not model.objects.filter(recipient_id=pk).exists(), model.__name__
    assert Notification.objects.count() == others
    assert Recipient.objects.filter(user_id="u-en-1").exists()
    assert SegmentMember.objects.filter(recipient__user_id="u-en-1").count() == 1


def test_the_record_of_an_erasure_names_nobody_but_answers_for_a_known_id(api, layla, client):
    api.delete(URL.format("u-ar-1"))
    record = Erasure.objects.get()
    assert (record.requested_by, record.notifications) == ("API client orders", 3)
    assert "u-ar-1" not in record.user_id_digest and record.user_id_digest == Erasure.digest_of("u-ar-1")
    assert len(record.user_id_digest) == 64 and Erasure.digest_of("u-en-1") != record.user_id_digest

    client.force_login(User.objects.get(username="admin"))
    found = client.get("/admin/notifications/erasure/", {"q": "u-ar-1"}).content.decode()
    assert '<td class="field-requested_by">API client orders</td>' in found
    missed = client.get("/admin/notifications/erasure/", {"q": "u-en-1"}).content.decode()
    assert '<td class="field-requested_by">' not in missed


def test_the_reveal_audit_outlives_the_record(api, layla):
    api.delete(URL.format("u-ar-1"))
    assert list(ContactReveal.objects.values_list("recipient_id", "recipient_user_id", "username", "field")) == [
        (None, "u-ar-1", "support", "phone")
    ]


def test_a_queued_notifications_task_finds_nothing_to_send_after_the_erasure(api, layla, smtp_sink):
    api.delete(URL.format("u-ar-1"))
    dispatch.deliver(layla["queued"])
    assert smtp_sink.messages() == []
    assert not Attempt.objects.filter(notification_id=layla["queued"]).exists()


def test_a_notification_being_sent_refuses_the_erasure_and_nothing_goes(api, layla):
    Notification.objects.filter(pk=layla["queued"]).update(state=State.SENDING)
    response = api.delete(URL.format("u-ar-1"))
    assert response.status_code == 409
    assert response["Retry-After"] == "2"
    assert response.json() == {
        "error": "conflict",
        "message": "A notification to this user is being handed to a provider right now; try again in a few seconds.",
    }
    assert Notification.objects.filter(pk__in=layla["ids"]).count() == 3
    assert Device.objects.filter(recipient=layla["recipient"]).count() == 2
    assert not Erasure.objects.exists()


def test_an_unknown_or_already_erased_user_is_a_404(api, layla):
    assert api.delete(URL.format("nobody")).status_code == 404
    assert api.delete(URL.format("u-ar-1")).status_code == 200
    again = api.delete(URL.format("u-ar-1"))
    assert (again.status_code, again.json()["message"]) == (404, "No user with id 'u-ar-1'.")
    assert Erasure.objects.count() == 1


def test_the_same_user_id_made_again_is_a_new_record_with_none_of_the_old(api, send, layla):
    api.delete(URL.format("u-ar-1"))
    assert send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "9"}}).status_code == 422
    made = api.put(URL.format("u-ar-1"), {"email": "layla@example.com", "language": "ar"}, format="json")
    assert made.status_code == 201
    preferences = api.get("/api/v1/users/u-ar-1/preferences").json()
    assert preferences["kinds"]["promo"]["channels"]["email"] is True
    assert api.get("/api/v1/users/u-ar-1/devices").json() == []
    # The old key names an erased event: the same key is a new notification for the new record.
    again = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "1"}}, key="order-1-shipped")
    assert (again.status_code, again.json()["duplicate"]) == (202, False)


def test_only_an_api_key_may_erase(client, layla):
    assert client.delete(URL.format("u-ar-1")).status_code == 401
    assert Recipient.objects.filter(user_id="u-ar-1").exists()


@pytest.mark.django_db(transaction=True)
def test_a_send_that_read_the_user_before_the_erasure_committed_is_a_409_and_stores_nothing(api, send, monkeypatch):
    """The race the record's lock cannot close: the send read the recipient, then the erasure committed."""
    accept = importlib.import_module("backend.notifications.actions.accept")  # the package exports the function
    real = accept._lookup

    def erased_just_after(request, now, client):
        found = real(request, now, client)
        erasure.erase(request.user_id, by="the test")
        return found

    monkeypatch.setattr(accept, "_lookup", erased_just_after)
    response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}, key="order-1-shipped")
    assert response.status_code == 409
    assert response.json() == {"error": "conflict", "message": ERASED_MEANWHILE}
    assert not Notification.objects.filter(idempotency_key="order-1-shipped").exists()
    monkeypatch.undo()
    again = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}, key="order-1-shipped")
    assert again.status_code == 422
