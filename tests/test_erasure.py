"""DELETE /api/v1/users/{user_id}: a user's record erased on request (backend/notifications/erasure.py)."""

import importlib
import threading
import time
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection, connections
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from backend.notifications import erasure, links, retention
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
from inbox import tokens as inbox_tokens
from inbox.models import InboxMessage
from tests.campaigns_setup import list_segment
from tests.processes import run_embedded

pytestmark = pytest.mark.usefixtures("demo_data")

URL = "/api/v1/users/{}"


@pytest.fixture(autouse=True)
def may_erase(orders_service) -> None:
    """The orders service handles the company's erasure requests here."""
    client = orders_service[0]
    client.may_erase = True
    client.save()


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


def test_a_client_not_made_may_erase_is_refused_and_nothing_goes(api, layla, orders_service):
    client = orders_service[0]
    client.may_erase = False
    client.save()  # as the admin saves it: every key cached in this process is forgotten
    response = api.delete(URL.format("u-ar-1"))
    assert response.status_code == 403
    assert response.json()["message"].startswith("This API client may not erase users")
    assert Notification.objects.filter(pk__in=layla["ids"]).count() == 3


@pytest.mark.django_db(transaction=True)
def test_a_worker_claiming_during_the_erasure_waits_and_then_claims_nothing(api, layla, monkeypatch):
    """The erasure locks the rows before it checks them: a claim cannot slip in between and send after a 200."""
    outcome: dict[str, int] = {}
    locked = threading.Event()
    delete = retention.delete_notifications

    def delete_slowly(ids):
        locked.set()  # every row of the person is locked now: give the claim time to reach its wait
        time.sleep(0.5)
        delete(ids)

    def erase():
        outcome["status"] = api.delete(URL.format("u-ar-1")).status_code
        connections.close_all()

    def claim():
        locked.wait(5)
        with connection.cursor() as cursor:  # the worker's claim: a conditional UPDATE of a queued row
            cursor.execute(
                "UPDATE notifications_notification SET state = 'sending' WHERE id = %s AND state = 'queued'",
                [layla["queued"]],
            )
            outcome["claimed"] = cursor.rowcount
        connections.close_all()

    monkeypatch.setattr(retention, "delete_notifications", delete_slowly)
    threads = [threading.Thread(target=erase), threading.Thread(target=claim)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert (outcome["status"], outcome["claimed"]) == (200, 0)
    assert not Notification.objects.filter(pk__in=layla["ids"]).exists()


EMBEDDED = """
import json
from django.test.utils import setup_test_environment
from rest_framework.test import APIClient
from django.core.management import call_command
from backend.notifications.models import ApiClient, Attempt, Notification, Recipient
setup_test_environment()
call_command("demo_data", stdout=open("/dev/null", "w"))
client, key = ApiClient.issue("privacy")
client.may_erase = True
client.save()
api = APIClient()
api.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
for n in range(3):
    body = {"user_id": "u-fa-1", "kind": "shipped", "params": {"order": str(n)}}
    api.post("/api/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY=f"o-{n}")
erased = api.delete("/api/v1/users/u-fa-1")
print("RESULT" + json.dumps([erased.status_code, erased.json()["erased"]["notifications"],
                             Notification.objects.filter(recipient__user_id="u-fa-1").count(),
                             Recipient.objects.filter(user_id="u-fa-1").exists(), Notification.objects.count()]))
"""


def test_the_embedded_default_sqlite_erases_a_user_with_notifications(tmp_path):
    """SQLite stores a UUID as 32 hex digits and binds no UUID object: the set-based delete must pass that form."""
    assert run_embedded(tmp_path, EMBEDDED) == [200, 3, 0, False, 0]


def test_support_searching_an_erased_user_id_is_told_it_was_erased(api, layla, client):
    api.delete(URL.format("u-ar-1"))
    client.force_login(User.objects.get(username="support"))
    page = client.get("/support/", {"q": "u-ar-1"}).content.decode()
    assert "A user with this id was erased on " in page and "at the request of API client orders" in page
    assert 'id="search-erased"' not in client.get("/support/", {"q": "u-en-1"}).content.decode()


def test_links_and_tokens_made_for_the_erased_record_do_not_open_a_new_one_of_the_same_id(api, client):
    """A link signed at T names u-ar-1; the u-ar-1 created at T + 60 s is someone else's record."""
    signed = timezone.now().replace(microsecond=0) + timedelta(days=1)
    with time_machine.travel(signed, tick=False):
        old_preferences = reverse("frontend:preferences", args=[links.preference_token("u-ar-1")])
        old_inbox_page = f"/inbox/{inbox_tokens.page_link('u-ar-1')}/"
        old_token = inbox_tokens.issue("u-ar-1").value
        assert client.get(old_preferences).status_code == 200
    with time_machine.travel(signed + timedelta(seconds=60), tick=False):
        assert api.delete(URL.format("u-ar-1")).status_code == 200
        api.put(URL.format("u-ar-1"), {"email": "new@example.com", "language": "ar"}, format="json")
        assert client.get(old_preferences).status_code == 404
        assert client.get(old_inbox_page).status_code == 404
        reader = APIClient()
        reader.credentials(HTTP_AUTHORIZATION=f"Bearer {old_token}")
        assert reader.get("/api/v1/users/u-ar-1/inbox").status_code == 401
        new_preferences = reverse("frontend:preferences", args=[links.preference_token("u-ar-1")])
        assert client.get(new_preferences).status_code == 200
        reader.credentials(HTTP_AUTHORIZATION=f"Bearer {inbox_tokens.issue('u-ar-1').value}")
        assert reader.get("/api/v1/users/u-ar-1/inbox").status_code == 200


def test_a_link_signed_by_a_process_whose_clock_is_a_little_behind_still_opens_a_new_record(api, client):
    """links.CLOCK_SKEW: the record made at T by one host, its first link signed by another that reads T - 3 s."""
    made = timezone.now().replace(microsecond=0) + timedelta(days=1)
    with time_machine.travel(made, tick=False):
        api.put(URL.format("new-1"), {"email": "n@example.com"}, format="json")
    with time_machine.travel(made - timedelta(seconds=3), tick=False):
        link = reverse("frontend:preferences", args=[links.preference_token("new-1")])
    with time_machine.travel(made + timedelta(seconds=1), tick=False):
        assert client.get(link).status_code == 200
