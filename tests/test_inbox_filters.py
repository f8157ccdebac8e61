"""The inbox page's unread / all / archived filters and its times in the person's language and time zone.

Persona: Layla (u-ar-1, Arabic, Asia/Riyadh, UTC+3).
"""

import re
from datetime import UTC, datetime

import pytest
import time_machine

from backend.notifications.delivery.dispatch import deliver
from inbox import actions, tokens
from inbox.models import InboxMessage

pytestmark = pytest.mark.usefixtures("demo_data")

SENT = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@pytest.fixture
def shipped(send):
    def put(order: int) -> InboxMessage:
        body = {"user_id": "u-ar-1", "kind": "shipped", "channel": "inapp", "params": {"order": str(order)}}
        with time_machine.travel(SENT, tick=False):
            pk = send(body, key=f"order-{order}").json()["id"]
            deliver(pk)
        return InboxMessage.objects.get(notification_id=pk)

    return put


@pytest.fixture
def three(shipped) -> dict[str, InboxMessage]:
    """One unread, one read and one archived message."""
    unread, read, archived = shipped(1), shipped(2), shipped(3)
    actions.mark_read("u-ar-1", read.pk)
    actions.archive("u-ar-1", archived.pk)
    return {"unread": unread, "read": read, "archived": archived}


def url(rest: str = "") -> str:
    return f"/inbox/{tokens.page_link('u-ar-1')}/{rest}"


def listed(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<li id="message-(\d+)"', html)]


def test_all_shows_every_message_not_archived_newest_first(client, three):
    html = client.get(url()).content.decode()
    assert listed(html) == [three["read"].pk, three["unread"].pk]
    assert '<a href="/inbox/' in html and 'aria-current="page">الكل</a>' in html


def test_unread_shows_only_unread_messages_and_the_live_list_keeps_the_filter(client, three):
    html = client.get(url() + "?show=unread").content.decode()
    assert listed(html) == [three["unread"].pk]
    assert 'aria-current="page">غير المقروءة</a>' in html
    assert f'hx-get="{url("messages")}?show=unread"' in html
    partial = client.get(url("messages") + "?show=unread", HTTP_HX_REQUEST="true").content.decode()
    assert listed(partial) == [three["unread"].pk]


def test_archived_shows_archived_messages_without_archive_or_read_all_buttons(client, three):
    html = client.get(url() + "?show=archived").content.decode()
    assert listed(html) == [three["archived"].pk]
    assert "أرشفة" not in html.split('id="inbox-list"')[1]
    assert "inbox-read-all" not in html


@pytest.mark.parametrize(
    ("show", "empty"),
    [("unread", "لا توجد رسائل غير مقروءة."), ("archived", "لا توجد رسائل مؤرشفة."), ("", "لا توجد رسائل بعد.")],
)
def test_each_filter_says_when_it_is_empty(client, show, empty):
    html = client.get(url() + (f"?show={show}" if show else "")).content.decode()
    assert f'<p class="inbox-empty">{empty}</p>' in html


def test_an_unknown_filter_shows_all(client, three):
    assert listed(client.get(url() + "?show=nope").content.decode()) == [three["read"].pk, three["unread"].pk]


def test_times_are_the_persons_local_date_for_the_widgets_relative_time_to_rewrite(client, shipped):
    shipped(1)
    html = client.get(url()).content.decode()
    # 10:00 UTC is 13:00 in Riyadh; the month in Arabic; page.js turns it into "منذ …" like the widget.
    assert '<time class="inbox-time" datetime="2026-11-30T13:00:00+03:00">30 نوفمبر 2026, 13:00</time>' in html
    assert '<script src="/static/inbox/page.js" defer></script>' in html


def test_a_filtered_list_partial_costs_four_queries(client, three, django_assert_num_queries):
    with django_assert_num_queries(4):  # recipient, messages, unread count, newest id
        client.get(url("messages") + "?show=archived", HTTP_HX_REQUEST="true")
