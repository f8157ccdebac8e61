"""The admin shows records read-only to every role, the superuser included: changes go through the actions.

Outside testing found the admin defeating two-person approval: an editor
changed a draft after the approver opened it, someone with both rights edited
another's draft keeping its author and approved it, a draft changed its kind,
language or channel (a clash was a 500), and "Add attempt" was a 500.
"""

import threading
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.db import IntegrityError, connections, transaction
from django.test import RequestFactory
from django.utils import timezone

from backend.notifications import actions
from backend.notifications.admin import ApiClientAdmin, NotificationAdmin, PreferenceInline
from backend.notifications.models import (
    ApiClient,
    Attempt,
    BreakerEvent,
    DeadLetter,
    Kind,
    Notification,
    Preference,
    Recipient,
    State,
    TemplateVersion,
    VelocityAlarm,
)
from backend.notifications.models.client import hash_api_key
from inbox.models import InboxMessage

pytestmark = pytest.mark.usefixtures("demo_data")

RECORDS = [TemplateVersion, Notification, Attempt, DeadLetter, BreakerEvent, VelocityAlarm, InboxMessage]
PACKED = "Your order {{ order }} is packed."


@pytest.fixture
def draft(editor) -> TemplateVersion:
    """The editor's draft shipped/en/sms v2, saved the way the editor page saves it."""
    return actions.save_template_draft(Kind.objects.get(name="shipped"), "en", "sms", editor, text_body=PACKED)


def logged_in(client, username: str):
    client.force_login(User.objects.get(username=username))
    return client


def change_form(version: TemplateVersion, **changes) -> dict:
    """What the admin's change form of a version would post, with ``changes``."""
    fields = {"kind": version.kind_id, "language": version.language, "channel": version.channel,
              "subject": version.subject, "text_body": version.text_body, "html_body": version.html_body}  # fmt: skip
    return {**fields, **changes}


def superuser_request():
    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(username="admin")
    return request


@pytest.mark.parametrize("model", RECORDS, ids=lambda model: model.__name__)
def test_not_even_a_superuser_may_add_change_or_delete_a_record(model):
    request = superuser_request()
    model_admin = admin.site._registry[model]
    assert model_admin.has_view_permission(request)
    permissions = (
        model_admin.has_add_permission(request),
        model_admin.has_change_permission(request),
        model_admin.has_delete_permission(request),
    )
    assert permissions == (False, False, False)


@pytest.mark.parametrize(
    ("inline", "parent"),
    # A person's preferences too: editable they bypassed set_preference (a security kind switched off, who unsaid).
    [*((inline, Notification) for inline in NotificationAdmin.inlines), (PreferenceInline, Recipient)],
    ids=lambda value: value.__name__,
)
def test_the_history_and_attempts_of_a_notification_and_a_persons_preferences_are_read_only(inline, parent):
    request, model_admin = superuser_request(), inline(parent, admin.site)
    permissions = (
        model_admin.has_add_permission(request, None),
        model_admin.has_change_permission(request, None),
        model_admin.has_delete_permission(request, None),
    )
    assert permissions == (False, False, False)


def test_the_preferences_inline_shows_who_changed_each():
    assert "changed_by" in PreferenceInline(Recipient, admin.site).get_fields(superuser_request(), None)


@pytest.mark.parametrize("username", ["editor", "admin"])
def test_a_draft_cannot_be_edited_in_the_admin(client, draft, username):
    """(a) its author after the approver opened it; (b) someone with every right, keeping the author."""
    response = logged_in(client, username).post(
        f"/admin/notifications/templateversion/{draft.pk}/change/", change_form(draft, text_body="Order lost.")
    )
    assert response.status_code == 403
    stored = TemplateVersion.objects.get(pk=draft.pk)
    assert (stored.text_body, stored.created_by.username, stored.status) == (PACKED, "editor", "draft")


def test_a_draft_cannot_move_to_another_language_in_the_admin(client, draft, editor):
    """(c) The clash with the Arabic v2 was an IntegrityError, a 500."""
    actions.save_template_draft(draft.kind, "ar", "sms", editor, text_body="طلبك {{ order }}")
    response = logged_in(client, "admin").post(
        f"/admin/notifications/templateversion/{draft.pk}/change/", change_form(draft, language="ar")
    )
    assert response.status_code == 403
    assert TemplateVersion.objects.get(pk=draft.pk).language == "en"


@pytest.mark.parametrize("model", ["templateversion", "attempt", "deadletter", "notification"])
def test_add_pages_are_refused_not_a_500(client, model):
    assert logged_in(client, "admin").get(f"/admin/notifications/{model}/add/").status_code == 403


def test_the_admin_approves_nothing(client, draft):
    """Approval binds to the content the approver was shown: only the editor page shows it and approves."""
    response = logged_in(client, "admin").post(
        "/admin/notifications/templateversion/",
        {"action": "approve_selected", admin.helpers.ACTION_CHECKBOX_NAME: [draft.pk]},
    )
    assert response.status_code in (200, 302)
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


def test_the_version_page_in_the_admin_shows_its_content_hash_and_links_the_editor(client, draft):
    page = logged_in(client, "approver").get(f"/admin/notifications/templateversion/{draft.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert draft.content_hash in html
    assert 'name="_save"' not in html
    listing = logged_in(client, "approver").get("/admin/notifications/templateversion/").content.decode()
    assert f'href="/templates/{draft.pk}/"' in listing


def test_support_still_replays_a_dead_letter_from_the_admin(client, send):
    pk = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "5012"}}).json()["id"]
    notification = Notification.objects.get(pk=pk)
    assert actions.claim(notification)
    assert actions.dead_letter(notification, "twilio", "twilio answered HTTP 503")
    letter = DeadLetter.objects.get(notification=notification)
    support = logged_in(client, "support")
    assert 'value="replay_selected"' in support.get("/admin/notifications/deadletter/").content.decode()
    response = support.post(
        "/admin/notifications/deadletter/",
        {"action": "replay_selected", admin.helpers.ACTION_CHECKBOX_NAME: [letter.pk]},
    )
    assert response.status_code == 302
    letter.refresh_from_db()
    assert letter.replayed_by == "support"
    assert Notification.objects.get(pk=pk).state == State.QUEUED


@pytest.mark.parametrize("query", ["params__code=482913", "params__code__startswith=4", "idempotency_key__contains=a"])
def test_support_cannot_filter_notifications_on_an_unlisted_field(client, send, query):
    body = {"user_id": "u-en-1", "kind": "otp", "channel": "sms", "params": {"code": "482913"}}
    assert send(body, key="login-u-en-1-1").status_code == 202
    logged_in(client, "support")
    # The code is still in params until the notification is sent: a filter's count would read it.
    assert client.get(f"/admin/notifications/notification/?{query}").status_code == 400
    assert client.get("/admin/notifications/notification/?state__exact=queued").status_code == 200
    assert client.get("/admin/notifications/notification/?within=week").status_code == 200


def test_the_notification_list_shows_the_last_day_unless_asked_for_a_wider_window(client, send):
    """Its window is read through the created_at BRIN: a page costs what the window holds, not the history."""
    ids = [send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": str(n)}}, key=f"w-{n}").json()["id"]
           for n in range(3)]  # fmt: skip
    now = timezone.now()
    for pk, age in zip(ids, [timedelta(minutes=5), timedelta(days=2), timedelta(days=30)], strict=True):
        Notification.objects.filter(pk=pk).update(created_at=now - age)
    logged_in(client, "support")

    def listed(query: str) -> list[str]:
        page = client.get(f"/admin/notifications/notification/{query}")
        assert page.status_code == 200
        return sorted(str(row.pk) for row in page.context["cl"].result_list)

    assert listed("") == listed("?within=day") == sorted(ids[:1])
    assert listed("?within=hour") == sorted(ids[:1])
    assert listed("?within=week") == sorted(ids[:2])
    assert listed("?within=all") == sorted(ids)
    assert "Last 24 hours" in client.get("/admin/notifications/notification/").content.decode()
    # An unknown window is Django's "?e=1" page (the list without filters), not a 500.
    wrong = client.get("/admin/notifications/notification/?within=year")
    assert (wrong.status_code, wrong["Location"]) == (302, "/admin/notifications/notification/?e=1")


@pytest.mark.parametrize(
    "changelist",
    ["notifications/recipient", "notifications/templateversion", "notifications/deadletter",
     "notifications/apiclient", "inbox/inboxmessage"],
)  # fmt: skip
def test_a_lookup_on_an_unlisted_field_is_400_not_500(client, changelist):
    logged_in(client, "admin")
    # The year is out of Python's range: the query raised ValueError while the page was drawn.
    assert client.get(f"/admin/{changelist}/?created_at__year=99999").status_code == 400
    assert client.get("/admin/notifications/deadletter/?replayed_at__year=99999").status_code == 400
    assert client.get("/admin/notifications/deadletter/?replayed_at__isempty=1").status_code == 200
    assert client.get(f"/admin/{changelist}/").status_code == 200


def test_a_kind_can_be_deleted_only_while_nothing_uses_it(client):
    """A kind in use has no delete link, action or page: its confirmation would load every protected row.

    A preference counts: it would be deleted with the kind, and a kind made again under that name
    would find the person's opt-out gone.
    """
    unused = Kind.objects.create(name="mistake", category="transactional", priority="standard", channels=["email"])
    shipped = Kind.objects.get(name="shipped")
    logged_in(client, "admin")

    assert client.get(f"/admin/notifications/kind/{shipped.pk}/delete/").status_code == 403
    assert client.post(f"/admin/notifications/kind/{shipped.pk}/delete/", {"post": "yes"}).status_code == 403
    assert "delete_selected" not in client.get("/admin/notifications/kind/").content.decode()
    bulk = {"action": "delete_selected", "_selected_action": [unused.pk, shipped.pk], "post": "yes"}
    refused = client.post("/admin/notifications/kind/", bulk)  # not an action of this list: the list again
    assert (refused.status_code, refused.templates[0].name) == (200, "admin/change_list.html")
    assert Kind.objects.filter(pk__in=[unused.pk, shipped.pk]).count() == 2
    opted_out = Kind.objects.create(name="opted", category="marketing", priority="standard", channels=["email"])
    Preference.objects.create(
        recipient=Recipient.objects.get(user_id="u-en-1"), kind=opted_out, channel="email", enabled=False
    )
    assert client.get(f"/admin/notifications/kind/{opted_out.pk}/delete/").status_code == 403
    assert client.get(f"/admin/notifications/kind/{unused.pk}/delete/").status_code == 200
    assert client.post(f"/admin/notifications/kind/{unused.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Kind.objects.filter(pk=unused.pk).exists() and Kind.objects.filter(pk=shipped.pk).exists()


@pytest.mark.django_db(transaction=True)  # the key is shown once the client is committed
def test_an_api_client_added_in_the_admin_keeps_its_form_and_one_that_sent_anything_cannot_be_deleted(client, send):
    logged_in(client, "admin")
    form = {"name": "audit", "is_active": "on", "reads_all_notifications": "on"}
    added = client.post("/admin/notifications/apiclient/add/", form, follow=True)
    [shown] = [str(message) for message in added.context["messages"] if "API key for audit" in str(message)]
    audit = ApiClient.objects.get(name="audit")
    key = shown.rsplit(": ", 1)[1]
    assert (audit.reads_all_notifications, audit.key_hash) == (True, hash_api_key(key)) and key.startswith("ntf_")

    sender = Notification.objects.get(
        pk=send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "5012"}}).json()["id"]
    )
    used = sender.client
    assert client.get(f"/admin/notifications/apiclient/{used.pk}/delete/").status_code == 403
    assert client.get(f"/admin/notifications/apiclient/{audit.pk}/delete/").status_code == 200
    assert client.post(f"/admin/notifications/apiclient/{audit.pk}/delete/", {"post": "yes"}).status_code == 302
    assert list(ApiClient.objects.filter(pk__in=[used.pk, audit.pk])) == [used]


def test_the_admin_limits_a_clients_kinds_and_rate_and_the_next_send_obeys(client, api, send, orders_service):
    logged_in(client, "admin")
    orders = orders_service[0]
    shipped = Kind.objects.get(name="shipped")
    form = {"name": "orders", "is_active": "on", "allowed_kinds": [shipped.pk], "rate_limit": "20"}
    changed = client.post(f"/admin/notifications/apiclient/{orders.pk}/change/", form)
    assert changed.status_code == 302
    orders.refresh_from_db()
    assert (orders.every_kind, orders.rate_limit, list(orders.allowed_kinds.all())) == (False, 20, [shipped])
    listing = client.get("/admin/notifications/apiclient/").content.decode()
    assert '<td class="field-kinds">shipped</td><td class="field-rate">20</td>' in listing
    refused = send({"user_id": "u-en-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1")
    assert refused.json()["fields"]["kind"][0].startswith("this API client may not send otp")
    assert (
        client.post(f"/admin/notifications/apiclient/{orders.pk}/change/", {**form, "rate_limit": "0"}).status_code
        == 200
    )


def test_the_admin_refuses_a_lookalike_or_case_twin_of_an_api_clients_name(client):
    logged_in(client, "admin")
    ApiClient.issue("orders")
    for name, message in [
        ("Orders", "A client&#x27;s name is lowercase ASCII letters, digits"),
        ("orders\u200b", "A client&#x27;s name is lowercase ASCII letters, digits"),
        ("orders", "API client with this Name already exists."),
    ]:
        answer = client.post("/admin/notifications/apiclient/add/", {"name": name, "is_active": "on"})
        assert answer.status_code == 200 and message in answer.content.decode(), name
    assert list(ApiClient.objects.values_list("name", flat=True)) == ["orders"]


def test_a_name_written_around_the_models_validation_is_refused_by_the_database():
    """The shell or a script that skips ``full_clean`` meets the CHECK (a trailing newline included)."""
    for name in ["Orders", "orders\n", "-orders", "оrders"]:
        with pytest.raises(IntegrityError), transaction.atomic():
            ApiClient.objects.create(name=name, key_hash=name.encode().hex())
    assert not ApiClient.objects.filter(name__iexact="orders").exists()


@pytest.mark.django_db(transaction=True)
def test_two_admins_adding_the_same_client_name_at_once_get_one_client_and_a_form_error(client, monkeypatch):
    """The second save loses the race for the UNIQUE: the form again, saying so, not a 500.

    The race is made certain: the other admin's client is committed, on a connection of its own,
    right after this form's own uniqueness check passed, as happens when both press Save together.
    """
    logged_in(client, "admin")
    checks = {"n": 0}
    validate_unique = ApiClient.validate_unique

    def other_admin():
        try:
            ApiClient.issue("orders")
        finally:
            connections.close_all()

    def other_admin_saves_first(self, exclude=None):
        validate_unique(self, exclude)
        checks["n"] += 1
        if checks["n"] == 1:
            rival = threading.Thread(target=other_admin)
            rival.start()
            rival.join()

    monkeypatch.setattr(ApiClient, "validate_unique", other_admin_saves_first)
    answer = client.post("/admin/notifications/apiclient/add/", {"name": "orders", "is_active": "on"})
    assert answer.status_code == 200 and "API client with this Name already exists." in answer.content.decode()
    assert 'value="orders"' in answer.content.decode()
    assert (checks["n"], ApiClient.objects.filter(name="orders").count()) == (2, 1)


@pytest.mark.django_db(transaction=True)
def test_a_save_that_fails_on_another_rule_is_not_tried_again_and_shows_no_key(client, monkeypatch):
    """Only a UNIQUE refusing a duplicate is answered by the form: any other IntegrityError stays an error,
    and the key of the client rolled back with it is never shown."""
    logged_in(client, "admin")
    calls = []

    def fails(self, request, obj, message):
        calls.append(obj.name)
        raise IntegrityError("insert or update on table violates foreign key constraint")

    monkeypatch.setattr(ApiClientAdmin, "log_addition", fails)
    with pytest.raises(IntegrityError):
        client.post("/admin/notifications/apiclient/add/", {"name": "audit", "is_active": "on"})
    page = client.get("/admin/notifications/apiclient/")
    assert (calls, ApiClient.objects.count()) == (["audit"], 0)
    assert "API key for" not in page.content.decode()


def test_the_inbox_message_list_shows_the_last_day_unless_asked_for_a_wider_window(client):
    """In-app messages are never purged: the admin reads a window of them through their created_at BRIN."""
    layla = Recipient.objects.get(user_id="u-ar-1")
    now = timezone.now()
    new, old = (
        InboxMessage.objects.create(recipient=layla, kind="shipped", title=title, created_at=now - age)
        for title, age in (("new", timedelta(hours=2)), ("old", timedelta(days=40)))
    )
    logged_in(client, "support")

    def listed(query: str) -> list[int]:
        page = client.get(f"/admin/inbox/inboxmessage/{query}")
        assert page.status_code == 200
        return sorted(message.pk for message in page.context["cl"].result_list)

    assert (listed(""), listed("?within=hour"), listed("?within=all")) == ([new.pk], [], sorted([new.pk, old.pk]))
