"""Campaign pacing (campaigns/pacing.py): its fields in the approved hash, what an author must keep, over the API."""

import copy
from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine

from campaigns import actions, pacing
from campaigns.content_hash import campaign_hash, digest
from campaigns.models import Campaign, ScheduleMode
from tests.campaigns_setup import draft, submitted
from tests.providers_setup import write_providers_file
from tests.test_campaign_api import BODY
from tests.test_campaign_content_hash import BASE, _content

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


# --- the content hash ----------------------------------------------------------------------------


def test_the_hash_of_content_without_pacing_is_the_one_stored_before_pacing_existed():
    # BASE as content_hash.py made it before pacing: its digest, pinned, must not move.
    assert digest(BASE) == "fd89c736c6040ccc73e1c8f370bc79f79cee46c1dc7579593c185428d964f7a5"


@pytest.mark.django_db
def test_a_campaign_approved_before_pacing_keeps_a_valid_approval(marketer, approver, demo_data):
    campaign = submitted(marketer)
    assert "pacing" not in _content(campaign)

    approved = actions.approve(campaign, approver, campaign.content_hash)

    assert approved.state == Campaign.State.APPROVED
    assert campaign_hash(approved) == approved.content_hash


PACINGS = [
    ("spread over hours", {"spread_seconds": 36_000}, {"spread_seconds": 36_000}),
    ("spread until", {"spread_until": datetime(2030, 12, 1, 18, tzinfo=UTC)},
     {"spread_until": "2030-12-01T18:00:00.000000Z"}),
    ("rate", {"rate_per_second": 50.0}, {"rate_per_second": 50.0}),
    ("sending hours", {"sending_hours_start": time(9), "sending_hours_end": time(20)},
     {"sending_hours": ["09:00:00", "20:00:00"]}),
]  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "fields", "content"), PACINGS, ids=[case for case, _, _ in PACINGS])
def test_each_pacing_field_enters_the_hash_only_when_set(marketer, demo_data, case, fields, content):
    plain = draft(marketer)
    paced = draft(marketer, segment=plain.segment, **fields)

    assert _content(paced)["pacing"] == content
    assert {k: v for k, v in _content(paced).items() if k != "pacing"} == _content(plain)
    assert digest(_content(paced)) != digest(_content(plain))


@pytest.mark.django_db
def test_an_edit_of_the_rate_after_approval_voids_it(marketer, approver, demo_data):
    campaign = submitted(marketer, rate_per_second=20.0)
    actions.approve(campaign, approver, campaign.content_hash)

    edited = actions.edit(campaign, marketer, rate_per_second=40.0)

    assert edited.state == Campaign.State.DRAFT and edited.content_hash == ""


def test_a_change_of_pacing_changes_the_hash():
    paced = copy.deepcopy(BASE) | {"pacing": {"rate_per_second": 50.0}}
    faster = copy.deepcopy(BASE) | {"pacing": {"rate_per_second": 60.0}}
    assert len({digest(BASE), digest(paced), digest(faster)}) == 3


# --- what an author must keep --------------------------------------------------------------------

REFUSED = [
    ("a window of 0", {"spread_seconds": 0}, "spread_seconds", "A spread window is longer than 0 seconds."),
    ("both spreads", {"spread_seconds": 60, "spread_until": NOW + timedelta(hours=2)}, "spread_until",
     'Spread either "over the next N hours" or "until" an instant, not both.'),
    ("until in the past", {"spread_until": NOW - timedelta(minutes=1)}, "spread_until",
     "The spread end (spread_until) must come after the campaign starts."),
    ("until before send_at", {"schedule_mode": ScheduleMode.AT, "send_at": NOW + timedelta(hours=3),
                              "spread_until": NOW + timedelta(hours=2)}, "spread_until",
     "The spread end (spread_until) must come after the campaign starts."),
    ("until with local-time waves", {"schedule_mode": ScheduleMode.LOCAL_TIME, "local_time": time(9),
                                     "spread_until": NOW + timedelta(hours=2)}, "spread_until",
     'With local-time waves give the spread as "over the next N hours": each wave spreads over it.'),
    ("a spread in sending hours", {"spread_seconds": 600, "sending_hours_start": time(9),
                                   "sending_hours_end": time(20)}, "spread_seconds",
     "A spread cannot be combined with sending hours: pick one of the two."),
    ("a rate of 0", {"rate_per_second": 0.0}, "rate_per_second", "A rate is more than 0 messages a second."),
    ("a rate over the budget", {"rate_per_second": 36.0}, "rate_per_second",
     "36 messages a second is above the push provider budget of 35 a second."),
    ("one bound of sending hours", {"sending_hours_start": time(9)}, "sending_hours",
     "Give sending hours as a start and an end time, e.g. 09:00–20:00, or neither."),
    ("sending hours start = end", {"sending_hours_start": time(9), "sending_hours_end": time(9)}, "sending_hours",
     "Sending hours start and end at different times (e.g. 09:00–20:00)."),
]  # fmt: skip


@pytest.fixture
def budget_35(settings, tmp_path):
    """FCM (push) at 50/s with 30 % kept for the high tier: a standard budget of 35/s."""
    path = write_providers_file(tmp_path / "providers.toml", "http://127.0.0.1:9", fcm={"rate": 50, "high_share": 0.3})
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}


@pytest.mark.django_db
@pytest.mark.parametrize(("case", "fields", "field", "message"), REFUSED, ids=[case for case, *_ in REFUSED])
def test_pacing_an_author_cannot_keep_is_refused(marketer, demo_data, budget_35, case, fields, field, message):
    with time_machine.travel(NOW, tick=False), pytest.raises(actions.CampaignRefused) as refused:
        draft(marketer, channel="push", **fields)

    assert (refused.value.field, refused.value.message) == (field, message)
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_a_rate_at_the_budget_is_kept(marketer, demo_data, budget_35):
    with time_machine.travel(NOW, tick=False):
        campaign = draft(marketer, channel="push", rate_per_second=35.0)
    assert campaign.rate_per_second == 35.0


# --- over the API --------------------------------------------------------------------------------


@pytest.fixture
def create(api):
    def _create(body: dict):
        with time_machine.travel(NOW, tick=False):
            return api.post("/api/v1/campaigns", body, format="json", HTTP_IDEMPOTENCY_KEY=body["name"])

    return _create


@pytest.mark.django_db
def test_the_api_takes_a_rate_per_hour_a_spread_and_sending_hours(create, demo_data):
    response = create({**BODY, "rate_per_hour": 7200, "spread_seconds": 3600})
    assert response.status_code == 201, response.json()
    campaign = Campaign.objects.get(pk=response.json()["id"])
    assert (campaign.rate_per_second, campaign.spread_seconds) == (2.0, 3600)
    assert (response.json()["rate_per_second"], response.json()["spread_seconds"]) == (2.0, 3600)

    hours = create({**BODY, "name": "Hours", "sending_hours_start": "09:00", "sending_hours_end": "20:00"})
    assert hours.status_code == 201, hours.json()
    assert (hours.json()["sending_hours_start"], hours.json()["sending_hours_end"]) == ("09:00:00", "20:00:00")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"spread_seconds": -5}, "spread_seconds", "A spread window is longer than 0 seconds."),
        ({"spread_until": "2026-12-01T07:00:00Z"}, "spread_until",
         "The spread end (spread_until) must come after the campaign starts."),
        ({"spread_until": "2026-12-05T10:00:00"}, "spread_until",
         "Include a UTC offset or Z, e.g. 2026-12-01T09:00:00Z."),
        ({"rate_per_second": 1, "rate_per_hour": 3600}, "rate_per_hour",
         "Give the rate per second or per hour, not both."),
        ({"sending_hours_start": "09:00", "sending_hours_end": "09:00"}, "sending_hours",
         "Sending hours start and end at different times (e.g. 09:00–20:00)."),
        ({"sending_hours_start": "09:00+03:30", "sending_hours_end": "20:00"}, "sending_hours_start",
         "Give a wall time without a UTC offset, e.g. 09:00: each recipient's own zone applies."),
    ],
    ids=["negative window", "until in the past", "naive until", "two rates", "start = end", "offset"],
)  # fmt: skip
def test_bad_pacing_over_the_api_is_a_422_naming_the_field(create, demo_data, change, field, message):
    response = create({**BODY, **change})
    assert response.status_code == 422, response.json()
    assert response.json()["fields"] == {field: [message]}
    assert not Campaign.objects.exists()


def test_describe_says_the_pacing_in_words():
    campaign = Campaign(
        spread_seconds=36_000, rate_per_second=0.5, sending_hours_start=time(9), sending_hours_end=time(20)
    )
    assert pacing.describe(campaign) == (
        "spread over 10 h · at most 1800 messages/h · sending hours 09:00–20:00 in each recipient's local time"
    )
    assert pacing.describe(Campaign()) == ""


# --- the composer --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_composer_reads_a_rate_per_hour_a_spread_in_hours_and_sending_hours(demo_data):
    from frontend.campaigns.composer import read_form

    composed = read_form(
        {"spread_hours": "0.5", "rate": "900", "rate_unit": "hour", "sending_hours_start": "09:00",
         "sending_hours_end": "20:00"}
    )  # fmt: skip

    fields = {name: composed.fields[name] for name in actions.EDITABLE_FIELDS if name in pacing_fields()}
    assert fields == {
        "spread_seconds": 1800, "spread_until": None, "rate_per_second": 0.25, "sending_hours_start": time(9),
        "sending_hours_end": time(20),
    }  # fmt: skip
    assert not {name for name in composed.errors if name in ("spread_hours", "rate", "rate_unit")}


@pytest.mark.django_db
def test_the_composer_names_pacing_it_cannot_read(demo_data):
    from frontend.campaigns.composer import read_form

    composed = read_form({"spread_hours": "ten", "rate": "inf", "rate_unit": "day", "sending_hours_start": "9h"})

    assert {name: composed.errors[name] for name in ("spread_hours", "rate", "rate_unit", "sending_hours_start")} == {
        "spread_hours": "Give the spread as a number of hours, e.g. 10 or 0.5.",
        "rate": "Give the rate as a number of messages, e.g. 50.",
        "rate_unit": "Pick messages per second or per hour.",
        "sending_hours_start": "Give a wall time such as 09:00.",
    }


def pacing_fields() -> set[str]:
    return {"spread_seconds", "spread_until", "rate_per_second", "sending_hours_start", "sending_hours_end"}
