"""Hostile input on the pacing fields, over the API and the composer: always a 4xx that names the field, never a 500."""

from datetime import UTC, datetime

import pytest
import time_machine

from campaigns import actions
from campaigns.models import Campaign
from tests.campaigns_setup import draft, list_segment
from tests.test_campaign_api import BODY
from tests.test_campaign_composer_pages import NEW, form, logged_in

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
TOO_LONG = "A spread window is at most 2,147,483,647 seconds (68 years)."
TOO_SLOW = "A rate is at least 1 message an hour."


@pytest.fixture
def segment(demo_data):
    return list_segment(name="Demo users")


@pytest.fixture
def create(api):
    def _create(body: dict):
        with time_machine.travel(NOW, tick=False):
            return api.post("/api/v1/campaigns", body, format="json", HTTP_IDEMPOTENCY_KEY=body["name"])

    return _create


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"spread_seconds": 10**12}, "spread_seconds", TOO_LONG),
        (
            {"spread_until": "9999-12-31T23:59:59Z"},
            "spread_until",
            "The spread end (spread_until) is at most 68 years after the campaign starts.",
        ),
        ({"rate_per_second": 1e-300}, "rate_per_second", TOO_SLOW),
        ({"rate_per_hour": 0.5}, "rate_per_second", TOO_SLOW),
    ],
    ids=["window past the column", "until in year 9999", "a rate of 1e-300/s", "half a message an hour"],
)
def test_pacing_out_of_range_over_the_api_is_a_422_naming_the_field(create, demo_data, change, field, message):
    response = create({**BODY, **change})

    assert response.status_code == 422, response.content
    assert response.json()["fields"] == {field: [message]}
    assert not Campaign.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"spread_until": "9999-12-31T23:59:59-05:00"}, "spread_until"),
        ({"sending_hours_start": "24:00", "sending_hours_end": "20:00"}, "sending_hours_start"),
        ({"sending_hours_start": "nine", "sending_hours_end": "20:00"}, "sending_hours_start"),
        ({"rate_per_second": "NaN"}, "rate_per_second"),
        ({"rate_per_second": "Infinity"}, "rate_per_second"),
        ({"spread_seconds": "1e3"}, "spread_seconds"),
    ],
    ids=["until past year 9999 in UTC", "24:00", "garbage hours", "NaN", "Infinity", "float window"],
)
def test_unreadable_pacing_over_the_api_is_a_4xx_naming_the_field(create, demo_data, change, field):
    response = create({**BODY, **change})

    assert 400 <= response.status_code < 500, response.content
    assert field in response.json()["fields"]
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_a_rate_of_one_message_an_hour_is_kept(marketer, demo_data):
    with time_machine.travel(NOW, tick=False):
        campaign = draft(marketer, rate_per_second=1 / 3600)
    assert campaign.rate_per_second == 1 / 3600


@pytest.mark.django_db
def test_the_longest_window_the_column_holds_is_kept(marketer, demo_data):
    with time_machine.travel(NOW, tick=False):
        campaign = draft(marketer, spread_seconds=2**31 - 1)
    assert campaign.spread_seconds == 2**31 - 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"spread_hours": "1e300"}, "spread_seconds", TOO_LONG),
        ({"rate": "1e-300", "rate_unit": "second"}, "rate_per_second", TOO_SLOW),
    ],
    ids=["a spread of 1e300 hours", "a rate of 1e-300/s"],
)
def test_the_composer_answers_out_of_range_pacing_with_the_form_and_a_message(
    client, marketer, segment, changes, field, message
):
    with time_machine.travel(NOW, tick=False):
        response = logged_in(client, marketer).post(NEW, form(segment, **changes))

    assert response.status_code == 422
    assert message in response.content.decode()
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_a_submit_of_a_draft_with_a_rate_too_slow_to_compute_is_refused(marketer, demo_data):
    """A draft stored before the floor (or by hand) must not crash the pre-flight's expected end at submit."""
    with time_machine.travel(NOW, tick=False):
        campaign = draft(marketer)
        Campaign.objects.filter(pk=campaign.pk).update(rate_per_second=1e-300)
        with pytest.raises(actions.CampaignRefused) as refused:
            actions.submit(campaign, marketer)

    assert (refused.value.field, refused.value.message) == ("rate_per_second", TOO_SLOW)
