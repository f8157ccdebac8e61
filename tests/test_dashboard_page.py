"""/support/dashboard/: who may open it, and the figures it polls (frontend/dashboard/views.py)."""

from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.auth.models import User

from backend.notifications.models import Notification

pytestmark = pytest.mark.usefixtures("demo_data")

NOW = datetime(2026, 11, 30, 12, 30, 30, tzinfo=UTC)
PAGE, DATA = "/support/dashboard/", "/support/dashboard/data"


@pytest.fixture
def support(outsider):
    """The support agent (tests/conftest.py calls them the templates' outsider)."""
    return outsider


@pytest.mark.parametrize("url", [PAGE, DATA])
def test_anonymous_visitors_are_sent_to_log_in(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"] == f"/admin/login/?next={url}"


@pytest.mark.parametrize("persona", ["editor", "marketer", "approver"])
@pytest.mark.parametrize("url", [PAGE, DATA])
def test_staff_without_the_support_role_get_403(client, persona, url):
    client.force_login(User.objects.get(username=persona))
    assert client.get(url).status_code == 403


@pytest.mark.parametrize("username", ["support", "admin"])
def test_support_and_the_administrator_see_the_page_with_its_charts(client, username):
    client.force_login(User.objects.get(username=username))
    response = client.get(PAGE + "?window=day")
    assert response.status_code == 200
    html = response.content.decode()
    for chart in ("sent", "latency", "failures", "dead_letters", "queue", "cost", "delivered"):
        assert f'id="chart-{chart}"' in html
    # Chart.js from our own static files, never a CDN; the page polls the day's figures every minute.
    assert '<script src="/static/frontend/vendor/chartjs/chart.umd.min.js" defer>' in html
    assert 'data-url="/support/dashboard/data?window=day" data-refresh="60"' in html
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.parametrize("url", [PAGE, DATA])
def test_an_unknown_window_is_a_400_that_names_the_choices(client, support, url):
    client.force_login(support)
    response = client.get(url + "?window=month")
    assert response.status_code == 400
    assert response.content.decode() == "Unknown window 'month': choose one of hour, day, week."


def test_the_data_are_the_aggregates_of_the_window(client, support, send):
    with time_machine.travel(datetime(2026, 11, 30, 12, 30, tzinfo=UTC), tick=False):
        response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}, key="dash-1")
    Notification.objects.filter(pk=response.json()["id"]).update(
        provider="smtp", sent_at=datetime(2026, 11, 30, 12, 30, 0, 250_000, tzinfo=UTC), state="delivered"
    )
    client.force_login(support)
    with time_machine.travel(NOW, tick=False):
        data = client.get(DATA).json()

    assert data["window"] == "hour" and data["unit"] == "minute"
    assert (len(data["labels"]), data["labels"][0], data["labels"][-1]) == (
        60,
        "2026-11-30T11:31:00+00:00",
        "2026-11-30T12:30:00+00:00",
    )
    assert data["sent"] == [{"name": "email", "values": [0] * 59 + [1]}]
    # Accepted at 12:30:00, taken by the provider 250 ms later.
    assert data["latency"] == [
        {"name": "standard p50", "values": [None] * 59 + [250.0]},
        {"name": "standard p95", "values": [None] * 59 + [250.0]},
    ]
    assert data["delivered"] == {
        "labels": ["smtp"],
        "providers": {"smtp": {"sent": 1, "delivered": 1, "ratio": 1.0}},
    }
    assert data["queued_now"] == {"high": 0, "standard": 0}
    assert data["open_dead_letters"] == 0
    assert data["cost"] == {"labels": [], "series": []}
    assert data["breakers"] == {"fake-push": "closed", "fake-sms": "closed", "inapp": "closed", "smtp": "closed"}


def test_the_home_page_links_the_dashboard_for_support_only(client, support, editor):
    client.force_login(support)
    assert 'href="/support/dashboard/"' in client.get("/").content.decode()
    client.force_login(editor)
    assert 'href="/support/dashboard/"' not in client.get("/").content.decode()
