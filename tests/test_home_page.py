"""The home page `/`: staff only, and traffic only for staff who may read notifications."""

import pytest
from django.contrib.auth.models import User

from backend.notifications import actions

pytestmark = pytest.mark.usefixtures("demo_data")

MASK = "••••••"


@pytest.fixture
def login_code():
    """An OTP accepted for Layla, code K7QX9Z (letters: no timestamp or id on a page can contain it by chance)."""
    request = actions.SendRequest(
        idempotency_key="login-u-ar-1-1", user_id="u-ar-1", kind="otp", params={"code": "K7QX9Z"},
        channel=None, priority=None, send_at=None,
    )  # fmt: skip
    return actions.accept(request, client=None).notification


@pytest.fixture
def support_agent():
    return User.objects.get(username="support")


@pytest.fixture
def staff_without_role():
    return User.objects.create_user("newhire", password="x", is_staff=True)


def test_anonymous_visitors_go_to_the_login_page(client, login_code):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/"


def test_staff_without_a_role_are_refused(client, staff_without_role, login_code):
    client.force_login(staff_without_role)
    response = client.get("/")
    assert response.status_code == 403
    assert b"K7QX9Z" not in response.content


def test_a_user_who_is_not_staff_is_refused_even_with_the_permission(client, login_code):
    from django.contrib.auth.models import Permission

    user = User.objects.create_user("customer", password="x")
    user.user_permissions.add(Permission.objects.get(codename="view_notification"))
    client.force_login(user)
    assert client.get("/").status_code == 403


def test_support_sees_recent_traffic_with_the_code_masked(client, support_agent, login_code):
    client.force_login(support_agent)
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "u-ar-1" in page
    assert f"رمز التحقق الخاص بك هو {MASK}. تنتهي صلاحيته خلال 5 دقائق." in page
    assert "K7QX9Z" not in page
    assert "no-cache" in response["Cache-Control"] and "private" in response["Cache-Control"]


@pytest.mark.parametrize("username", ["editor", "approver", "marketer"])
def test_template_roles_get_the_links_but_not_the_traffic(client, username, login_code):
    client.force_login(User.objects.get(username=username))
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'href="/templates/"' in page
    assert "u-ar-1" not in page and "Recent" not in page and "Notifications by state" not in page


def test_the_superuser_sees_the_traffic(client, login_code):
    client.force_login(User.objects.get(username="admin"))
    page = client.get("/").content.decode()
    assert "Recent" in page and "u-ar-1" in page and "K7QX9Z" not in page


def test_support_gets_no_link_to_the_template_editor_it_may_not_open(client, support_agent):
    """Support holds no template permission: /templates/ answers it 403, so its home page does not offer it."""
    client.force_login(support_agent)
    assert client.get("/templates/").status_code == 403
    page = client.get("/").content.decode()
    assert 'href="/templates/"' not in page
    assert 'href="/admin/"' in page and 'href="/api/v1/docs"' in page


@pytest.mark.parametrize(
    ("username", "campaigns", "segments", "templates"),
    [
        ("marketer", True, True, True),
        ("approver", True, True, True),
        ("editor", False, False, True),
    ],
)
def test_the_navigation_offers_each_role_the_pages_it_may_open(client, login_code, username, campaigns, segments,
                                                               templates):  # fmt: skip
    user = User.objects.get(username=username)
    client.force_login(user)
    nav = client.get("/").content.decode().split("<nav>")[1].split("</nav>")[0]
    offered = ('href="/campaigns/"' in nav, 'href="/campaigns/segments/"' in nav, 'href="/templates/"' in nav)
    assert offered == (campaigns, segments, templates)
    for link, shown in zip(("/campaigns/", "/campaigns/segments/", "/templates/"), offered, strict=True):
        assert (client.get(link).status_code == 200) is shown


def test_the_traffic_is_the_last_days_read_through_the_state_changes(client, support_agent, login_code):
    """Older notifications are neither counted nor listed: the page reads the state changes' BRIN window,
    not the whole table. The latest ten come from the nearest window that has any."""
    from datetime import timedelta

    from django.utils import timezone

    from backend.notifications.models import Notification, StateChange

    week_old = timezone.now() - timedelta(days=8)
    StateChange.objects.filter(notification=login_code).update(at=week_old)
    client.force_login(support_agent)
    page = client.get("/").content.decode()
    assert "u-ar-1" not in page and "None in the last 24 hours" in page

    StateChange.objects.filter(notification=login_code).update(at=timezone.now() - timedelta(hours=3))
    Notification.objects.filter(pk=login_code.pk).update(state="sent")
    page = client.get("/").content.decode()
    assert "Accepted in the last day, newest first." in page and "u-ar-1" in page
    assert "<dt>sent</dt><dd>1</dd>" in page


def test_every_staff_page_says_who_is_signed_in_and_logs_out(client):
    client.force_login(User.objects.get(username="marketer"))
    nav = client.get("/campaigns/").content.decode().split("<nav>")[1].split("</nav>")[0]
    assert '<span id="signed-in-as" dir="auto">marketer</span>' in nav
    assert '<form class="who" method="post" action="/admin/logout/">' in nav and 'name="next" value="/"' in nav
    assert client.post("/admin/logout/", {"next": "/"}).status_code == 302
    assert client.get("/campaigns/").status_code == 302  # to the login page
