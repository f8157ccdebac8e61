"""The pre-flight (campaigns/preflight.py): counts set-based, waves, SMS cost per country, duration; frozen at submit.

Every expected figure below is worked out by hand from the audience built here:

* ``flash`` (marketing, SMS) — Arabic: 100 × "ع" then the name (UCS-2: 103 units with "Sam",
  2 segments of 67; worst case 100 + 40 × 😀 = 180 units, 3 segments); English: 100 × "a"
  then the name (GSM-7: 103 septets, 1 segment; worst 100 + 40 × € = 180 septets, 2 segments).
* 13 recipients: 6 Arabic in Saudi Arabia (+966: one opted out, one without a phone), 4 English
  in the US (+1 415: one number disabled), 2 English in Canada (+1 416, not in the price list),
  1 French speaker in the UK (+44, gets the English fallback).
* So 10 will be sent: ar 4 (SA), en 6 (US 3, CA 2, GB 1). SA 4 × 2 segments × 0.0450 = 0.3600;
  US 3 × 1 × 0.0079 = 0.0237; GB 1 × 1 × 0.0400 = 0.0400; total 0.4237. Worst case: SA
  4 × 3 × 0.0450 = 0.5400, US 3 × 2 × 0.0079 = 0.0474, GB 1 × 2 × 0.0400 = 0.0800: 0.6674.
"""

from datetime import UTC, datetime, time
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone

from backend.notifications import pricing
from backend.notifications.delivery import dispatch
from backend.notifications.models import Attempt, Category, Kind, Notification, Preference, Recipient, TemplateVersion
from backend.notifications.sms_encoding import analyze
from campaigns import actions, fanout
from campaigns.models import Campaign, ScheduleMode
from campaigns.preflight import preflight, region_for_prefix
from tests.campaigns_setup import list_segment
from tests.providers_setup import write_providers_file

NOW = datetime(2026, 12, 1, 5, 0, tzinfo=UTC)
AR_TEXT = "ع" * 100 + " {{ name }}"
EN_TEXT = "a" * 100 + " {{ name }}"
# user id → (language, phone, time zone, what stops it)
PEOPLE = {
    **{f"sa-{n}": ("ar", f"+96650123450{n}", "Asia/Riyadh", "") for n in range(4)},
    "sa-out": ("ar", "+966501234599", "Asia/Riyadh", "opted-out"),
    "sa-none": ("ar", "", "Asia/Riyadh", "no-address"),
    **{f"us-{n}": ("en", f"+1415234567{n}", "America/New_York", "") for n in range(3)},
    "us-off": ("en", "+14152345699", "America/New_York", "address-disabled"),
    **{f"ca-{n}": ("en", f"+1416234567{n}", "America/Toronto", "") for n in range(2)},
    "gb-0": ("fr", "+447400123456", "Europe/London", ""),
}


@pytest.fixture
def flash(demo_data) -> Kind:
    """A marketing SMS kind with approved Arabic and English templates (see the module docstring)."""
    kind = Kind.objects.create(
        name="flash", category=Category.MARKETING, channels=["sms"], opt_out_allowed=True, default_language="en",
        params={"name": {"example": "Sam", "max_length": 40}},
    )  # fmt: skip
    for language, text in (("ar", AR_TEXT), ("en", EN_TEXT)):
        TemplateVersion.objects.create(
            kind=kind, language=language, channel="sms", text_body=text, status=TemplateVersion.Status.APPROVED
        )
    return kind


@pytest.fixture
def people(flash) -> list[str]:
    for user_id, (language, phone, zone, stop) in PEOPLE.items():
        recipient = Recipient.objects.create(
            user_id=user_id, language=language, phone=phone, time_zone=zone,
            phone_disabled_at=NOW if stop == "address-disabled" else None,
        )  # fmt: skip
        if stop == "opted-out":
            Preference.objects.create(recipient=recipient, kind=flash, channel="sms", enabled=False)
    return list(PEOPLE)


def campaign_of(marketer, flash, people, **fields) -> Campaign:
    with time_machine.travel(NOW, tick=False):
        return actions.create_draft(
            marketer, name="Flash sale", kind=flash, channel="sms", params={"name": "Sam"},
            segment=list_segment(people, name="Flash audience"), correction_none_reason="None needed.",
            template_versions={v.language: v.pk for v in TemplateVersion.objects.filter(kind=flash)}, **fields,
        ).campaign  # fmt: skip


@pytest.mark.parametrize(
    ("prefix", "region"),
    [
        ("+966", "SA"),  # a code of one region: the code is enough
        ("+201", "EG"),
        ("+1415", "US"),  # NANP: the area code decides
        ("+1416", "CA"),
        ("+1242", "BS"),  # a NANP region with leading digits
        ("+7701", "KZ"),  # +7 shared by RU and KZ
        ("+7495", "RU"),
        ("+44740012", "GB"),  # +44 shared by GB, GG, IM, JE
        ("+44791112", "GG"),
        ("+44162472", "IM"),
        ("+800", None),  # non-geographic
        ("", None),
        ("+", None),
    ],
)
def test_a_phone_prefix_names_its_region(prefix, region):
    assert region_for_prefix(prefix) == region


def test_counts_stops_languages_and_sms_cost_per_country(marketer, flash, people):
    figures = preflight(campaign_of(marketer, flash, people), NOW)

    assert figures["computed_at"] == "2026-12-01T05:00:00Z"
    assert (figures["audience"], figures["will_send"]) == (13, 10)
    assert figures["stopped"] == {"address-disabled": 1, "no-address": 1, "opted-out": 1}
    assert figures["languages"] == {"ar": 4, "en": 6}
    assert figures["sms"] == {
        "currency": "USD",
        "per_language": [
            {"language": "ar", "encoding": "UCS-2", "segments": 2, "recipients": 4},
            {"language": "en", "encoding": "GSM-7", "segments": 1, "recipients": 6},
        ],
        "per_country": [
            {"country": "CA", "recipients": 2, "segments": 2, "price_per_segment": None, "cost": None},
            {"country": "GB", "recipients": 1, "segments": 1, "price_per_segment": "0.0400", "cost": "0.0400"},
            {"country": "SA", "recipients": 4, "segments": 8, "price_per_segment": "0.0450", "cost": "0.3600"},
            {"country": "US", "recipients": 3, "segments": 3, "price_per_segment": "0.0079", "cost": "0.0237"},
        ],
        "total": "0.4237",
        "worst_case_total": "0.6674",
    }


@pytest.mark.parametrize(
    ("schedule", "waves"),
    [
        ({}, [("2026-12-01T05:00:00Z", 10)]),  # now: one wave at the start
        ({"schedule_mode": ScheduleMode.AT, "send_at": datetime(2026, 12, 2, 8, 0, tzinfo=UTC)},
         [("2026-12-02T08:00:00Z", 10)]),
        # 09:00 local: Riyadh (+03:00) at 06:00Z, London at 09:00Z, New York and Toronto (−05:00) at 14:00Z.
        ({"schedule_mode": ScheduleMode.LOCAL_TIME, "local_time": time(9, 0)},
         [("2026-12-01T06:00:00Z", 4), ("2026-12-01T09:00:00Z", 1), ("2026-12-01T14:00:00Z", 5)]),
        # 07:30 local: Riyadh's 07:30 (04:30Z) has passed at 05:00Z, so tomorrow's.
        ({"schedule_mode": ScheduleMode.LOCAL_TIME, "local_time": time(7, 30)},
         [("2026-12-01T07:30:00Z", 1), ("2026-12-01T12:30:00Z", 5), ("2026-12-02T04:30:00Z", 4)]),
    ],
)  # fmt: skip
def test_waves_follow_the_schedule(marketer, flash, people, schedule, waves):
    figures = preflight(campaign_of(marketer, flash, people, **schedule), NOW)

    assert [(w["at"], w["size"]) for w in figures["waves"]] == waves


@pytest.mark.parametrize(
    ("schedule", "when"),
    [({}, "now"), ({"schedule_mode": ScheduleMode.AT, "send_at": datetime(2026, 12, 2, 8, 0, tzinfo=UTC)}, "at")],
)
def test_one_wave_for_every_zone_has_no_offset_and_says_whether_its_instant_is_known(
    marketer, flash, people, schedule, when
):
    """Not "UTC+00:00", read as London's; and "now" is the pre-flight's instant, not the start (approval decides)."""
    [wave] = preflight(campaign_of(marketer, flash, people, **schedule), NOW)["waves"]
    assert (wave["utc_offset"], wave["when"]) == ("", when)


def test_local_time_waves_name_their_zones_and_offset(marketer, flash, people):
    campaign = campaign_of(marketer, flash, people, schedule_mode=ScheduleMode.LOCAL_TIME, local_time=time(9, 0))

    last = preflight(campaign, NOW)["waves"][-1]
    assert (last["utc_offset"], last["zones"]) == ("UTC−05:00", ["America/New_York", "America/Toronto"])


@pytest.mark.parametrize(
    ("twilio", "budget", "duration"),
    [
        ({"rate": 50, "high_share": 0.3}, 35, 0.29),  # 10 / 35 s
        ({"rate": 10}, 10, 1.0),
        ({}, None, None),  # no rate: no budget, no estimate
    ],
)
def test_duration_at_the_standard_tiers_budget(marketer, flash, people, settings, tmp_path, twilio, budget, duration):
    path = write_providers_file(tmp_path / "providers.toml", "http://127.0.0.1:9", twilio=twilio)
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}

    figures = preflight(campaign_of(marketer, flash, people), NOW)

    assert (figures["budget_per_second"], figures["duration_seconds"]) == (budget, duration)


def test_non_sms_campaigns_have_no_cost(marketer, demo_data):
    from tests.campaigns_setup import draft

    figures = preflight(draft(marketer), timezone.now())

    assert (figures["audience"], figures["will_send"], figures["sms"]) == (3, 3, None)
    assert figures["languages"] == {"ar": 1, "en": 1, "fa": 1}


def test_submit_freezes_the_preflight_and_an_edit_clears_it(marketer, flash, people):
    campaign = campaign_of(marketer, flash, people)

    submitted = actions.submit(campaign, marketer)
    assert (submitted.preflight["will_send"], submitted.preflight["sms"]["total"]) == (10, "0.4237")
    assert Campaign.objects.get(pk=campaign.pk).preflight == submitted.preflight

    edited = actions.edit(submitted, marketer, name="Flash sale (2)")
    assert (edited.state, edited.preflight) == ("draft", {})


def test_preflight_figures_equal_what_happened_on_the_stubs(marketer, approver, flash, people, stub_providers):
    """A small campaign end to end: fan-out, then delivery to the stub Twilio; the stubs' record matches."""
    submitted = actions.submit(campaign_of(marketer, flash, people), marketer)
    figures = submitted.preflight
    campaign = actions.approve(submitted, approver, submitted.content_hash)
    assert actions.start(campaign)
    assert fanout.fan_out(campaign.pk).complete
    fanout.feed(limit=100)  # a worker claims a campaign's row only once it was fed
    for pk in Notification.objects.filter(campaign=campaign, state="queued").values_list("pk", flat=True):
        dispatch.deliver(str(pk))

    made = Notification.objects.filter(campaign=campaign)
    stopped = {}
    for reason in made.filter(state="suppressed").values_list("reason", flat=True):
        stopped[reason] = stopped.get(reason, 0) + 1
    assert stopped == figures["stopped"]
    received = stub_providers.state.messages
    assert len(received) == made.filter(state="sent").count() == figures["will_send"]
    per_country: dict[str, list[int]] = {}
    for message in received:
        counts = per_country.setdefault(pricing.country_for_number(message["to"]), [0, 0])
        counts[0], counts[1] = counts[0] + 1, counts[1] + analyze(message["text"]).segments
    assert {row["country"]: [row["recipients"], row["segments"]] for row in figures["sms"]["per_country"]} == (
        per_country
    )
    charged = sum(a.cost for a in Attempt.objects.filter(notification__campaign=campaign) if a.cost is not None)
    assert charged == Decimal(figures["sms"]["total"])
