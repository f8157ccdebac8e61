"""The demo end user's inbox page (HTMX), its signed link, and the inbox_link command."""

import io
import re
from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from backend.notifications.delivery.dispatch import deliver
from inbox import actions, tokens
from inbox.models import InboxMessage

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def shipped(send):
    def put(order: int, user_id: str = "u-ar-1") -> InboxMessage:
        body = {"user_id": user_id, "kind": "shipped", "channel": "inapp", "params": {"order": str(order)}}
        pk = send(body, key=f"order-{order}-{user_id}").json()["id"]
        deliver(pk)
        return InboxMessage.objects.get(notification_id=pk)

    return put


def url(user_id: str = "u-ar-1", rest: str = "") -> str:
    return f"/inbox/{tokens.page_link(user_id)}/{rest}"


def test_the_arabic_page_is_right_to_left_in_arabic_with_the_newest_first(client, shipped):
    first, second = shipped(1), shipped(2)
    response = client.get(url())
    assert response.status_code == 200
    assert response["Content-Language"] == "ar"
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "<title>صندوق الوارد</title>" in html
    assert html.index(f'id="message-{second.pk}"') < html.index(f'id="message-{first.pk}"')
    assert html.count(">تعليم كمقروء<") == 2
    assert ">تعليم الكل كمقروء<" in html
    assert 'data-unread="2"' in html
    token = re.search(r'data-token="([^"]+)"', html).group(1)
    assert tokens.verify(token) == "u-ar-1"


def test_the_english_page_is_left_to_right_and_empty(client):
    html = client.get(url("u-en-1")).content.decode()
    assert '<html lang="en" dir="ltr">' in html
    assert "No messages yet." in html


def test_the_list_partial_costs_four_queries(client, shipped, django_assert_num_queries):
    for order in range(1, 6):
        shipped(order)
    with django_assert_num_queries(4):  # recipient, page, unread count, newest id
        response = client.get(url(rest="messages"), HTTP_HX_REQUEST="true")
    assert response.content.decode().count('class="inbox-message is-unread"') == 5


def test_marking_read_with_htmx_answers_the_row_and_records_the_read(client, shipped):
    message = shipped(1)
    response = client.post(url(rest=f"messages/{message.pk}/read"), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    row = response.content.decode()
    assert row.startswith(f'<li id="message-{message.pk}" class="inbox-message" data-id="{message.pk}">')
    assert "تعليم كمقروء" not in row
    assert InboxMessage.objects.get(pk=message.pk).read_at is not None


def test_without_htmx_actions_redirect_back_to_the_page(client, shipped):
    message = shipped(1)
    response = client.post(url(rest=f"messages/{message.pk}/archive"))
    assert (response.status_code, response["Location"]) == (302, url())
    assert InboxMessage.objects.get(pk=message.pk).archived_at is not None


def test_archiving_with_htmx_removes_the_row(client, shipped):
    message = shipped(1)
    response = client.post(url(rest=f"messages/{message.pk}/archive"), HTTP_HX_REQUEST="true")
    assert (response.status_code, response.content) == (200, b"")


def test_read_all_stops_at_the_newest_message_on_the_page(client, shipped):
    first, second = shipped(1), shipped(2)
    client.post(url(rest="read-all"), {"through": str(first.pk)}, HTTP_HX_REQUEST="true")
    assert [(m.pk, m.read_at is not None) for m in InboxMessage.objects.order_by("id")] == [
        (first.pk, True),
        (second.pk, False),
    ]


def test_read_all_with_a_through_that_is_no_number_reads_everything(client, shipped):
    first = shipped(1)
    response = client.post(url(rest="read-all"), {"through": "²"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert InboxMessage.objects.get(pk=first.pk).read_at is not None


def test_another_persons_message_is_404_on_my_page(client, shipped):
    theirs = shipped(1, user_id="u-en-1")
    assert client.post(url(rest=f"messages/{theirs.pk}/read"), HTTP_HX_REQUEST="true").status_code == 404
    assert InboxMessage.objects.get(pk=theirs.pk).read_at is None


def test_a_bad_or_expired_link_gets_a_page_that_says_which(client, settings):
    bad = client.get("/inbox/not-a-link/")
    assert bad.status_code == 400
    assert "This link is not valid" in bad.content.decode()
    assert client.get(f"/inbox/{tokens.issue('u-ar-1').value}/").status_code == 400  # a socket token is not a link
    with time_machine.travel(timezone.now() - timedelta(days=8), tick=False):
        old = tokens.page_link("u-ar-1")
    expired = client.get(f"/inbox/{old}/")
    assert expired.status_code == 410


def test_the_widget_gets_a_fresh_token_with_a_csrf_protected_post(shipped):
    browser = Client(enforce_csrf_checks=True)
    assert browser.post(url(rest="token")).status_code == 403
    html = browser.get(url()).content.decode()
    csrf = re.search(r'data-csrf-token="([^"]+)"', html).group(1)
    response = browser.post(url(rest="token"), HTTP_X_CSRFTOKEN=csrf)
    assert response.status_code == 200
    assert tokens.verify(response.json()["token"]) == "u-ar-1"
    assert response.json()["expires_in"] == 900


def test_the_embed_page_carries_the_widget(client):
    html = client.get(url(rest="embed")).content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert '<script src="/static/inbox/widget.js"></script>' in html
    assert 'id="bell" data-notify-inbox data-lang="ar"' in html


def test_inbox_link_prints_a_working_link(client):
    out = io.StringIO()
    call_command("inbox_link", "u-ar-1", "--base-url", "http://127.0.0.1:8000/", stdout=out)
    link = out.getvalue().strip()
    assert link.startswith("http://127.0.0.1:8000/inbox/") and link.endswith("/")
    assert client.get(link.removeprefix("http://127.0.0.1:8000")).status_code == 200


def test_inbox_link_points_at_the_public_url_by_default(settings):
    """As mail links do: a demo on another port (bin/demo sets NOTIFY_PUBLIC_URL) gets links to itself."""
    settings.NOTIFY = {**settings.NOTIFY, "PUBLIC_URL": "http://127.0.0.1:19100"}
    out = io.StringIO()
    call_command("inbox_link", "u-ar-1", stdout=out)
    assert out.getvalue().startswith("http://127.0.0.1:19100/inbox/")


def test_inbox_link_refuses_an_unknown_user():
    with pytest.raises(
        CommandError, match=r"No user with id 'u-nobody': create it with PUT /api/v1/users/\{user_id\}."
    ):
        call_command("inbox_link", "u-nobody", stdout=io.StringIO())


def test_the_demo_has_inapp_templates_in_arabic_english_and_persian(shipped):
    assert shipped(1).title == "تم شحن طلبك رقم 1"
    assert shipped(2, user_id="u-en-1").title == "Order 2 has shipped"
    persian = shipped(3, user_id="u-fa-1")
    assert (persian.language, persian.title) == ("fa", "سفارش 3 ارسال شد")


def test_actions_refuse_an_unknown_user():
    with pytest.raises(actions.UnknownUser):
        actions.mark_all_read("u-nobody")


@pytest.mark.parametrize("username", ["support", "admin"])
def test_support_sees_inbox_messages_read_only_in_the_admin(client, shipped, username):
    message = shipped(1)
    client.force_login(User.objects.get(username=username))
    listing = client.get("/admin/inbox/inboxmessage/?q=u-ar-1")
    assert listing.status_code == 200
    assert "تم شحن طلبك رقم 1" in listing.content.decode()
    detail = client.get(f"/admin/inbox/inboxmessage/{message.pk}/change/")
    assert detail.status_code == 200
    assert 'name="_save"' not in detail.content.decode()
    changed = client.post(f"/admin/inbox/inboxmessage/{message.pk}/change/", {"title": "changed", "body": "x"})
    assert changed.status_code == 403
    assert client.get("/admin/inbox/inboxmessage/add/").status_code == 403
    assert InboxMessage.objects.get(pk=message.pk).title == "تم شحن طلبك رقم 1"


def test_support_never_sees_the_code_of_an_otp_sent_in_app(client, send):
    body = {"user_id": "u-en-1", "kind": "otp", "channel": "inapp", "params": {"code": "482913"}}
    answer = send(body, key="login-u-en-1-1")
    assert answer.status_code == 202, answer.json()
    deliver(answer.json()["id"])
    message = InboxMessage.objects.get(notification_id=answer.json()["id"])
    assert "482913" in message.body  # the person's own inbox has the code: that is the delivery
    client.force_login(User.objects.get(username="support"))
    listing = client.get("/admin/inbox/inboxmessage/").content.decode()
    detail = client.get(f"/admin/inbox/inboxmessage/{message.pk}/change/").content.decode()
    assert "482913" not in listing
    assert "482913" not in detail
    assert "••••••" in detail


@pytest.mark.parametrize("gone", ["notification", "notification and kind"])
def test_the_code_stays_masked_once_retention_deleted_the_notification(client, send, gone):
    """Retention sets the message's notification NULL; the message's own kind (or, gone, not knowing) still masks."""
    body = {"user_id": "u-en-1", "kind": "otp", "channel": "inapp", "params": {"code": "482913"}}
    answer = send(body, key="login-u-en-1-1")
    deliver(answer.json()["id"])
    message = InboxMessage.objects.get(notification_id=answer.json()["id"])
    message.notification = None
    message.save()
    if gone == "notification and kind":
        InboxMessage.objects.filter(pk=message.pk).update(kind="otp-retired")
    client.force_login(User.objects.get(username="support"))
    listing = client.get("/admin/inbox/inboxmessage/").content.decode()
    detail = client.get(f"/admin/inbox/inboxmessage/{message.pk}/change/").content.decode()
    assert "482913" not in listing and "482913" not in detail
    assert "Your code is" not in detail
    assert "••••••" in detail


@pytest.mark.parametrize(
    "query",
    ["body__contains=482913", "body__startswith=Your+code+is+4", "title__contains=code"],
)
def test_support_cannot_guess_the_code_by_filtering_the_admin_list(client, send, query):
    body = {"user_id": "u-en-1", "kind": "otp", "channel": "inapp", "params": {"code": "482913"}}
    deliver(send(body, key="login-u-en-1-1").json()["id"])
    client.force_login(User.objects.get(username="support"))
    # A count of 1 against 0 would read the code a digit at a time: the lookup is refused instead.
    assert client.get(f"/admin/inbox/inboxmessage/?{query}").status_code == 400
    assert client.get("/admin/inbox/inboxmessage/?kind__exact=otp").status_code == 200
