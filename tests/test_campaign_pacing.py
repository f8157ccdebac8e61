"""Campaign pacing (campaigns/pacing.py): its fields in the approved hash, what an author must keep, over the API."""

import copy
from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine

from backend.notifications.models import Notification, Recipient, State
from backend.notifications.queues import HUEYS
from campaigns import actions, fanout, pacing, report
from campaigns.content_hash import campaign_hash, digest
from campaigns.fanout import Timing, send_timing
from campaigns.models import Campaign, CampaignAudit, ScheduleMode, Segment, SegmentMember
from tests.campaigns_setup import draft, list_segment, submitted
from tests.processes import run_embedded
from tests.providers_setup import write_providers_file
from tests.test_campaign_api import BODY
from tests.test_campaign_composer_pages import NEW, PREFLIGHT, form
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
        # No providers file: email has no budget to cap it. 1e308/s overflowed the feeder's credit to infinity.
        ({"rate_per_second": 1e308}, "rate_per_second", "A rate is at most 1,000,000 messages a second."),
    ],
    ids=["negative window", "until in the past", "naive until", "two rates", "start = end", "offset", "huge rate"],
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
        "spread over 10 h · at most 1,800 messages/h · sending hours 09:00–20:00 in each recipient's local time"
    )
    assert pacing.describe(Campaign()) == ""


DESCRIBED_RATES = [
    # The review page and the PDF group thousands as rate_words does ("1,800 messages an hour"), and keep every digit
    # the marketer gave (rate_amount): 0.5/s is 1,800 an hour, 1/7 a second 514.285714 an hour.
    (0.5, "at most 1,800 messages/h", "1,800 messages an hour"),
    (7000 / 3600, "at most 7,000 messages/h", "7,000 messages an hour"),
    (1_234_567 / 3600, "at most 1,234,567 messages/h", "1,234,567 messages an hour"),
    (1500.0, "at most 1,500 messages/s", "1,500 messages a second"),
    (50.0, "at most 50 messages/s", "50 messages a second"),
    (1 / 7, "at most 514.285714 messages/h", "514 messages an hour"),
]


@pytest.mark.parametrize(("per_second", "described", "words"), DESCRIBED_RATES)
def test_describe_groups_thousands_as_the_other_pages_do(per_second, described, words):
    assert (pacing.describe(Campaign(rate_per_second=per_second)), pacing.rate_words(per_second)) == (described, words)


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


# --- sending hours -------------------------------------------------------------------------------
# Worked out by hand from the IANA rules: Asia/Tehran is +03:30 all year (no DST since 2022); New York
# springs forward on Sunday 8 March 2026 at 02:00 EST (−05:00 → −04:00) and falls back on Sunday
# 1 November 2026 at 02:00 EDT (−04:00 → −05:00). The campaign starts at 19:55 UTC the evening before:
# 23:25 in Tehran (outside 09:00–20:00), 14:55 EST / 15:55 EDT in New York (inside).


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


SPRING_EVE, FALL_EVE = utc(2026, 3, 7, 19, 55), utc(2026, 10, 31, 19, 55)
NINE_TO_EIGHT = (time(9), time(20))
TEHRAN, NEW_YORK = "Asia/Tehran", "America/New_York"
OPEN = (None, None)

HOURS_TABLE = [
    ("Tehran 23:25: its 09:00 the next morning", SPRING_EVE, TEHRAN, OPEN, None,
     Timing(utc(2026, 3, 8, 5, 30), "sending-hours", False)),
    ("New York 14:55 EST: inside, at once", SPRING_EVE, NEW_YORK, OPEN, None, Timing(None, "", False)),
    ("a 21:00 EST wave: 09:00 EDT the next morning, after the clocks sprang forward", SPRING_EVE, NEW_YORK, OPEN,
     time(21), Timing(utc(2026, 3, 8, 13), "sending-hours", False)),
    ("quiet 14:00–23:00 end at 23:00 EST, outside the hours: 09:00 EDT wins", SPRING_EVE, NEW_YORK,
     (time(14), time(23)), None, Timing(utc(2026, 3, 8, 13), "sending-hours", False)),
    ("Tehran on the fall-back eve: 09:00 +03:30", FALL_EVE, TEHRAN, OPEN, None,
     Timing(utc(2026, 11, 1, 5, 30), "sending-hours", False)),
    ("New York 15:55 EDT on the fall-back eve: at once", FALL_EVE, NEW_YORK, OPEN, None, Timing(None, "", False)),
    ("a 21:00 EDT wave: 09:00 EST the next morning, after the clocks fell back", FALL_EVE, NEW_YORK, OPEN, time(21),
     Timing(utc(2026, 11, 1, 14), "sending-hours", False)),
    ("quiet 22:00–10:00 in Tehran end after the 09:00 opening: 10:00 wins", SPRING_EVE, TEHRAN,
     (time(22), time(10)), None, Timing(utc(2026, 3, 8, 6, 30), "quiet-hours", False)),
    ("quiet 19:00–21:00 in New York's 15:55 EDT: inside both, at once", FALL_EVE, NEW_YORK, (time(19), time(21)),
     None, Timing(None, "", False)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "now", "zone", "quiet", "wall", "expected"), HOURS_TABLE, ids=[row[0] for row in HOURS_TABLE]
)
def test_outside_its_sending_hours_a_recipient_waits_for_the_instant_worked_out_by_hand(
    case, now, zone, quiet, wall, expected
):
    timing = send_timing(
        now=now, zone=zone, quiet_start=quiet[0], quiet_end=quiet[1], local_time=wall, start=now,
        sending_hours=NINE_TO_EIGHT,
    )  # fmt: skip
    assert timing == expected, case


def test_sending_hours_opening_at_a_wall_time_that_does_not_exist_open_at_the_jump():
    # 02:30 does not exist in New York on 8 March 2026: the window opens when the clocks jump, 03:00 EDT (07:00Z).
    timing = send_timing(
        now=utc(2026, 3, 8, 5), zone=NEW_YORK, quiet_start=None, quiet_end=None, sending_hours=(time(2, 30), time(20))
    )
    assert timing == Timing(utc(2026, 3, 8, 7), "sending-hours", False)


def test_sending_hours_across_midnight_and_past_the_end_time():
    # 22:00–06:00 in Tehran; at 12:00 UTC (15:30 there) it waits for 22:00 (18:30Z), after the end time.
    timing = send_timing(
        now=utc(2026, 3, 10, 12), zone=TEHRAN, quiet_start=None, quiet_end=None, end_at=utc(2026, 3, 10, 18),
        sending_hours=(time(22), time(6)),
    )  # fmt: skip
    assert timing == Timing(utc(2026, 3, 10, 18, 30), "sending-hours", True)


HOURS_USERS = {"h-tehran": TEHRAN, "h-ny": NEW_YORK}


@pytest.fixture
def hours_people(demo_data) -> list[str]:
    Recipient.objects.bulk_create(
        Recipient(user_id=user_id, email=f"{user_id}@example.com", language="en", time_zone=zone)
        for user_id, zone in HOURS_USERS.items()
    )
    return list(HOURS_USERS)


@pytest.mark.django_db
def test_a_campaign_started_at_1955_utc_keeps_tehran_waiting_for_its_morning(hours_people, marketer, approver):
    with time_machine.travel(SPRING_EVE, tick=False):
        campaign = submitted(
            marketer, segment=list_segment(hours_people, name="Hours"), sending_hours_start=time(9),
            sending_hours_end=time(20),
        )  # fmt: skip
        actions.approve(campaign, approver, campaign.content_hash)
        fanout.tick()

    made = {
        n.recipient.user_id: (n.state, n.reason, n.send_at) for n in Notification.objects.select_related("recipient")
    }
    assert made["h-tehran"] == ("scheduled", "sending-hours", utc(2026, 3, 8, 5, 30))
    assert made["h-ny"][:2] == ("queued", "")

    with time_machine.travel(utc(2026, 3, 8, 5, 29), tick=False):
        assert fanout.release_due() == 0
    with time_machine.travel(utc(2026, 3, 8, 5, 30), tick=False):
        assert fanout.release_due() == 1
    assert Notification.objects.get(recipient__user_id="h-tehran").state == State.QUEUED


# --- spread --------------------------------------------------------------------------------------

SPREAD_START = utc(2026, 12, 1, 10)


@pytest.fixture
def three_thousand(demo_data):
    """3,000 English recipients in UTC with an email address, in a list segment."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"s-{n:04d}", email=f"s-{n:04d}@example.com", language="en", time_zone="UTC")
        for n in range(3000)
    )
    segment = Segment.objects.create(name="Three thousand", kind=Segment.Kind.LIST)
    SegmentMember.objects.bulk_create(
        SegmentMember(segment=segment, recipient_id=pk)
        for pk in Recipient.objects.filter(user_id__startswith="s-").values_list("pk", flat=True)
    )
    return segment


@pytest.mark.django_db
def test_a_campaign_over_10_minutes_to_3000_recipients_sends_about_300_a_minute(three_thousand, marketer, approver):
    # Ten minutes of the scheduler in ten steps of time_machine: the fan-out at the start, then each minute
    # release_due hands over the rows whose place in the spread came, as run_forever's tick would.
    with time_machine.travel(SPREAD_START, tick=False):
        campaign = submitted(marketer, segment=three_thousand, spread_seconds=600)
        assert (campaign.preflight["rate_per_second"], campaign.preflight["expected_end"]) == (
            5.0,
            "2026-12-01T10:10:00Z",
        )
        actions.approve(campaign, approver, campaign.content_hash)
        fanout.tick()

    rows = Notification.objects.filter(campaign=campaign)
    assert rows.count() == rows.filter(state=State.SCHEDULED, reason="campaign-spread").count() == 3000
    per_minute = []
    for minute in range(1, 11):
        with time_machine.travel(SPREAD_START + timedelta(minutes=minute), tick=False):
            released = fanout.release_due()
            assert fanout.feed() == released  # handed to the standard queue in the same tick
            per_minute.append(released)
    assert sum(per_minute) == 3000 == HUEYS["standard"].pending_count()
    assert all(285 <= n <= 315 for n in per_minute), per_minute  # ~300 a minute, ±5 %
    last = rows.order_by("-send_at").values_list("send_at", flat=True).first()
    assert SPREAD_START <= last < SPREAD_START + timedelta(minutes=10)


@pytest.mark.django_db
def test_a_spread_until_an_instant_counts_from_the_start(three_thousand, marketer, approver):
    with time_machine.travel(SPREAD_START, tick=False):
        campaign = submitted(marketer, segment=three_thousand, spread_until=SPREAD_START + timedelta(minutes=30))
        assert campaign.preflight["rate_per_second"] == round(3000 / 1800, 6)
        actions.approve(campaign, approver, campaign.content_hash)
        fanout.tick()

    instants = Notification.objects.filter(campaign=campaign).values_list("send_at", flat=True)
    assert min(instants) >= SPREAD_START and max(instants) < SPREAD_START + timedelta(minutes=30)
    halves = sum(1 for at in instants if at < SPREAD_START + timedelta(minutes=15))
    assert 1450 <= halves <= 1550


def test_the_spread_offset_is_the_golden_ratio_sequence():
    assert [round(pacing.spread_offset(n, 100), 3) for n in (1, 2, 3)] == [61.803, 23.607, 85.41]


@pytest.mark.django_db
def test_a_resume_shifts_the_remaining_spread_rows_by_the_pause(three_thousand, marketer, approver):
    with time_machine.travel(SPREAD_START, tick=False):
        campaign = submitted(marketer, segment=three_thousand, spread_seconds=600)
        actions.approve(campaign, approver, campaign.content_hash)
        fanout.tick()
    before = dict(Notification.objects.filter(campaign=campaign).values_list("pk", "send_at"))

    assert pacing.on_resume(campaign, 120) == 3000

    after = dict(Notification.objects.filter(campaign=campaign).values_list("pk", "send_at"))
    assert {pk: at - before[pk] for pk, at in after.items()} == {pk: timedelta(minutes=2) for pk in before}


@pytest.mark.django_db
def test_resuming_a_paused_spread_campaign_moves_its_unreleased_rows_by_the_pause(three_thousand, marketer, approver):
    with time_machine.travel(SPREAD_START, tick=False) as clock:
        campaign = submitted(marketer, segment=three_thousand, spread_seconds=600)
        actions.approve(campaign, approver, campaign.content_hash)
        fanout.tick()
        clock.shift(60)
        released = fanout.release_due()
        actions.pause(Campaign.objects.get(pk=campaign.pk), marketer)
        waiting = dict(
            Notification.objects.filter(campaign=campaign, state=State.SCHEDULED).values_list("pk", "send_at")
        )
        clock.shift(3600)
        actions.resume(Campaign.objects.get(pk=campaign.pk), marketer)

        moved = dict(Notification.objects.filter(pk__in=waiting).values_list("pk", "send_at"))
        assert {pk: at - waiting[pk] for pk, at in moved.items()} == {pk: timedelta(hours=1) for pk in waiting}
        audit = CampaignAudit.objects.get(campaign=campaign, action=CampaignAudit.Action.RESUME)
        assert audit.detail["spread_shifted"] == len(waiting) == 3000 - released
        assert 270 <= released <= 330
        assert fanout.release_due() == 0  # nothing bursts at the resume


# --- per-campaign rate and fair share ------------------------------------------------------------


def people(prefix: str, count: int) -> Segment:
    """``count`` new English recipients in UTC with an email address, in a list segment of their own."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"{prefix}-{n:05d}", email=f"{prefix}-{n:05d}@example.com", language="en", time_zone="UTC")
        for n in range(count)
    )
    segment = Segment.objects.create(name=prefix, kind=Segment.Kind.LIST)
    members = Recipient.objects.filter(user_id__startswith=f"{prefix}-").values_list("pk", flat=True)
    SegmentMember.objects.bulk_create(SegmentMember(segment=segment, recipient_id=pk) for pk in members)
    return segment


def fed(campaign: Campaign) -> int:
    return Notification.objects.filter(campaign=campaign, queued_at__isnull=False).count()


def running(marketer, approver, segment: Segment, **fields) -> Campaign:
    campaign = submitted(marketer, segment=segment, name=segment.name, **fields)
    return actions.approve(campaign, approver, campaign.content_hash)


@pytest.mark.django_db
def test_two_campaigns_at_50_and_200_a_second_are_each_fed_at_their_rate(demo_data, marketer, approver):
    # Twenty ticks of the scheduler, one a second (time_machine); the clock is on each campaign's row.
    with time_machine.travel(SPREAD_START, tick=False):
        slow = running(marketer, approver, people("slow", 1_100), rate_per_second=50.0)
        fast = running(marketer, approver, people("fast", 4_300), rate_per_second=200.0)
        fanout.tick()  # start, fan-out, and the first second's feed
    assert (fed(slow), fed(fast)) == (50, 200)

    for second in range(1, 21):
        with time_machine.travel(SPREAD_START + timedelta(seconds=second), tick=False):
            fanout.feed()

    assert (fed(slow) - 50, fed(fast) - 200) == (1_000, 4_000)


@pytest.mark.django_db
def test_an_idle_spell_is_not_made_up_by_a_burst(demo_data, marketer, approver):
    with time_machine.travel(SPREAD_START, tick=False):
        campaign = running(marketer, approver, people("idle", 300), rate_per_second=10.0)
        fanout.tick()
    with time_machine.travel(SPREAD_START + timedelta(minutes=5), tick=False):
        fanout.feed()
    assert fed(campaign) == 20  # the first second, then one second's worth: not 5 minutes' worth


@pytest.mark.django_db
def test_the_queues_room_is_shared_fairly_between_running_campaigns(demo_data, marketer, approver):
    with time_machine.travel(SPREAD_START, tick=False):
        first = running(marketer, approver, people("first", 30))
        second = running(marketer, approver, people("second", 30))
        paced = running(marketer, approver, people("paced", 30), rate_per_second=3.0)
        fanout.start_due()
        for campaign in (first, second, paced):
            fanout.fan_out(campaign.pk)
        assert fanout.feed(limit=20) == 20

    # The paced one takes the 3 its rate allows; the other two share the rest, neither starves.
    assert (fed(first), fed(second), fed(paced)) == (9, 8, 3)


@pytest.mark.parametrize(
    ("wants", "room", "given"),
    [
        ({1: 100, 2: 100}, 10, {1: 5, 2: 5}),
        ({1: 100, 2: 3, 3: 100}, 20, {1: 9, 2: 3, 3: 8}),
        ({1: 2, 2: 3}, 100, {1: 2, 2: 3}),
        ({1: 10, 2: 10, 3: 10}, 10, {1: 4, 2: 3, 3: 3}),
        ({1: 0, 2: 50}, 10, {1: 0, 2: 10}),
        ({}, 10, {}),
    ],
)
def test_fair_split_is_max_min_fair(wants, room, given):
    assert pacing.fair_split(wants, room) == given


@pytest.mark.parametrize(
    ("rate", "clock", "now", "expected"),
    [
        (50.0, None, 0.0, (50, -1.0, 0)),  # a new clock: one second's worth
        (50.0, (-1.0, 50), 0.5, (25, -1.0, 50)),
        (50.0, (-1.0, 50), 0.01, (0, -1.0, 50)),
        (50.0, (-1.0, 50), 1.05, (52, -1.0, 50)),  # a tick a little late loses nothing
        (50.0, (-1.0, 50), 300.0, (50, 299.0, 0)),  # idle: no catch-up, the clock restarts a second ago
        (0.25, None, 0.0, (1, -4.0, 0)),  # under one a second: one row, then one each 4 s
        (0.25, (-4.0, 1), 3.9, (0, -4.0, 1)),
        (0.25, (-4.0, 1), 4.0, (1, -4.0, 1)),
    ],
)
def test_the_allowance_is_rate_times_elapsed_less_what_was_fed(rate, clock, now, expected):
    at = SPREAD_START + timedelta(seconds=now)
    paced_from = SPREAD_START + timedelta(seconds=clock[0]) if clock else None
    rows, since, count = pacing.allowance(rate, paced_from, clock[1] if clock else 0, at)
    assert (rows, (since - SPREAD_START).total_seconds(), count) == expected


# --- the embedded default (SQLite) ---------------------------------------------------------------

EMBEDDED = """
import io, json
from datetime import UTC, datetime, timedelta
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from backend.notifications.models import Notification, Recipient
from campaigns import actions, fanout, pacing, report
from tests.campaigns_setup import list_segment, submitted

call_command("demo_data", stdout=io.StringIO())
for n in range(3):
    Recipient.objects.create(user_id=f"e-{n}", email=f"e-{n}@example.com", language="en", time_zone="UTC")
start = datetime(2026, 12, 1, 10, tzinfo=UTC)
out = {}
with time_machine.travel(start, tick=False):
    campaign = submitted(User.objects.get(username="marketer"), segment=list_segment(["e-0", "e-1", "e-2"]),
                         spread_seconds=600, rate_per_second=1.0)
    actions.approve(campaign, User.objects.get(username="approver"), campaign.content_hash)
    fanout.tick()
rows = Notification.objects.filter(campaign=campaign).select_related("recipient")
out["made"] = sorted([n.state, n.reason, round((n.send_at - start).total_seconds(), 3),
                      round(pacing.spread_offset(n.recipient_id, 600), 3)] for n in rows)
with time_machine.travel(start + timedelta(seconds=601), tick=False):
    fanout.tick()
out["fed"] = Notification.objects.filter(campaign=campaign, queued_at__isnull=False).count()
print("RESULT" + json.dumps(out))
"""


def test_the_embedded_default_sqlite_spreads_and_paces(tmp_path):
    result = run_embedded(tmp_path, EMBEDDED)

    assert [row[:2] for row in result["made"]] == [["scheduled", "campaign-spread"]] * 3
    assert all(abs(at - offset) <= 0.001 for _, _, at, offset in result["made"]), result["made"]
    assert result["fed"] == 1  # released at once, fed at 1 a second


# --- the composer, review and report pages -------------------------------------------------------


@pytest.mark.django_db
def test_a_marketer_composes_a_paced_campaign_and_the_approver_reads_its_pace(client, marketer, approver, demo_data):
    segment = list_segment(name="Paced")
    paced = form(segment, rate="1800", rate_unit="hour", sending_hours_start="09:00", sending_hours_end="20:00",
                 save=None, submit="1")  # fmt: skip
    client.force_login(marketer)

    response = client.post(NEW, paced)

    assert response.status_code == 302
    campaign = Campaign.objects.get()
    assert (campaign.state, campaign.rate_per_second, campaign.sending_hours_start) == ("submitted", 0.5, time(9))
    client.force_login(approver)
    page = client.get(f"/campaigns/{campaign.pk}/review").content.decode()
    expected = "at most 1,800 messages/h · sending hours 09:00–20:00 in each recipient&#x27;s local time"
    assert f'<dd id="review-pacing">{expected}</dd>' in page
    assert report.gather(campaign).pacing == expected.replace("&#x27;", "'")


@pytest.mark.django_db
def test_the_expected_end_waits_for_each_zones_sending_hours(demo_data):
    # 00:25 UTC: New York (19:25) is inside 09:00–20:00 and goes at once; Tehran (+03:30) opens at 05:30 UTC,
    # Riyadh (+03) at 06:00, Berlin (+01) at 08:00. 30 each at 500 an hour take 216 s: the last part ends 08:03:36.
    campaign = Campaign(rate_per_second=500 / 3600, sending_hours_start=time(9), sending_hours_end=time(20))
    zones = {"America/New_York": 30, "Asia/Tehran": 30, "Asia/Riyadh": 30, "Europe/Berlin": 30}
    wave = {"at": "2026-12-01T00:25:00Z", "utc_offset": "UTC+00:00", "zones": sorted(zones), "size": 120}

    rate, end = pacing.expected_pace(campaign, [wave], None, zones)

    assert (rate, end) == (0.138889, "2026-12-01T08:03:36Z")
    assert pacing.expected_pace(campaign, [wave], None) == (0.138889, "2026-12-01T00:39:24Z")  # no zones: at once


NINE_TO_EIGHT_PM = {"sending_hours_start": time(9), "sending_hours_end": time(20)}
WAITING_ZONES = [
    (
        # At 00:25 UTC New York reads 19:25 (inside 09:00–20:00); 09:00 comes at 05:30 UTC in Tehran (+03:30), at
        # 06:00 UTC in Riyadh (+03), at 08:00 UTC in Berlin and Paris (+01, one line).
        "zones outside wait until 09:00 their time",
        NINE_TO_EIGHT_PM,
        {
            "at": "2026-12-01T00:25:00Z",
            "zones": ["America/New_York", "Asia/Riyadh", "Asia/Tehran", "Europe/Berlin", "Europe/Paris"],
        },
        [
            {"zones": "Asia/Tehran", "local": "09:00", "at": "2026-12-01T05:30:00Z", "utc": "2026-12-01 05:30 UTC"},
            {"zones": "Asia/Riyadh", "local": "09:00", "at": "2026-12-01T06:00:00Z", "utc": "2026-12-01 06:00 UTC"},
            {
                "zones": "Europe/Berlin, Europe/Paris",
                "local": "09:00",
                "at": "2026-12-01T08:00:00Z",
                "utc": "2026-12-01 08:00 UTC",
            },
        ],
    ),
    (
        # 12:00 UTC: 15:00 in Riyadh, 13:00 in Berlin, both inside.
        "every zone inside the hours: none waits",
        NINE_TO_EIGHT_PM,
        {"at": "2026-12-01T12:00:00Z", "zones": ["Asia/Riyadh", "Europe/Berlin"]},
        [],
    ),
    (
        # 22:00–06:00 across midnight: at 12:00 UTC Riyadh reads 15:00, outside, and opens at 22:00 = 19:00 UTC;
        # Tokyo (+09) reads 21:00, outside, opens at 22:00 = 13:00 UTC.
        "hours across midnight",
        {"sending_hours_start": time(22), "sending_hours_end": time(6)},
        {"at": "2026-12-01T12:00:00Z", "zones": ["Asia/Riyadh", "Asia/Tokyo"]},
        [
            {"zones": "Asia/Tokyo", "local": "22:00", "at": "2026-12-01T13:00:00Z", "utc": "2026-12-01 13:00 UTC"},
            {"zones": "Asia/Riyadh", "local": "22:00", "at": "2026-12-01T19:00:00Z", "utc": "2026-12-01 19:00 UTC"},
        ],
    ),
    (
        "no sending hours: nothing waits for them",
        {},
        {"at": "2026-12-01T00:25:00Z", "zones": ["America/New_York", "Asia/Riyadh"]},
        [],
    ),
]


@pytest.mark.parametrize(("case", "hours", "wave", "waiting"), WAITING_ZONES, ids=[case for case, *_ in WAITING_ZONES])
def test_each_wave_names_the_zones_that_wait_for_the_sending_hours_and_until_when(case, hours, wave, waiting):
    from frontend.campaigns.composer import display

    figures = {"stopped": {}, "waves": [{**wave, "utc_offset": "UTC+00:00", "size": 10}]}

    assert display(figures, Campaign(**hours))["wave_rows"][0]["waiting"] == waiting


@pytest.mark.django_db
def test_the_live_preflights_waves_say_who_waits_for_the_sending_hours(client, marketer, demo_data):
    client.force_login(marketer)
    paced = form(list_segment(name="Hours"), kind="promo", channel="email", rate="600", rate_unit="hour",
                 param_order=None, param_percent="20")  # fmt: skip
    hours = {**paced, "sending_hours_start": "09:00", "sending_hours_end": "20:00"}
    with time_machine.travel(NOW, tick=False):
        page = client.post(PREFLIGHT, hours, headers={"HX-Request": "true"}).content.decode()

    # 08:00 UTC: 11:00 in Riyadh, 11:30 in Tehran (inside); 03:00 in New York, where 09:00 is 14:00 UTC.
    assert (
        'America/New_York wait until 09:00 local, <time datetime="2026-12-01T14:00:00Z">2026-12-01 14:00 UTC</time>'
        in page
    )
    assert "Asia/Riyadh" not in page.split('id="pf-waves"')[1].split("</table>")[0]


@pytest.mark.django_db
def test_the_live_preflight_says_a_slow_pace_per_hour_and_a_conflict_at_once(client, marketer, demo_data):
    client.force_login(marketer)
    paced = form(list_segment(name="Spread"), kind="promo", channel="email", spread_hours="2", param_order=None,
                 param_percent="20")  # fmt: skip
    with time_machine.travel(NOW, tick=False):
        page = client.post(PREFLIGHT, paced, headers={"HX-Request": "true"}).content.decode()
        both = client.post(PREFLIGHT, {**paced, "sending_hours_start": "09:00", "sending_hours_end": "20:00"},
                           headers={"HX-Request": "true"}).content.decode()  # fmt: skip

    assert "Expected pace <strong>1.5 messages an hour</strong>, done by <strong>2026-12-01 10:00 UTC</strong>" in page
    assert 'id="preflight-error"' not in page
    conflict = "A spread cannot be combined with sending hours: pick one of the two."
    # Said as the form changes, not only on submit; no figures for a pacing that cannot be sent.
    assert f'<p class="tpl-error" role="alert" id="preflight-error">No pre-flight yet: {conflict}</p>' in both
    assert "Expected pace" not in both


@pytest.mark.django_db
def test_a_paced_preflight_does_not_also_promise_the_budgets_duration(client, marketer, demo_data, budget_35):
    client.force_login(marketer)
    segment = list_segment(name="Push")
    fast, slow = (
        form(segment, kind="promo", channel="push", rate=rate, param_order=None, param_percent="20")
        for rate in ("", "0.5")
    )
    with time_machine.travel(NOW, tick=False):
        pages = [client.post(PREFLIGHT, data, headers={"HX-Request": "true"}).content.decode() for data in (fast, slow)]

    assert 'id="pf-duration">Expected duration' in pages[0]
    assert "Expected pace <strong>1,800 messages an hour</strong>" in pages[1] and 'id="pf-duration"' not in pages[1]


@pytest.mark.django_db
def test_a_paced_preflight_without_a_budget_or_sending_hours_says_only_what_holds(client, marketer, demo_data):
    # The demo's email has no budget: beside "done by 01:45" it said "no duration estimate", and it said
    # "recipients outside the sending hours wait for them" of a campaign without sending hours.
    client.force_login(marketer)
    paced = form(list_segment(name="Mail"), kind="promo", channel="email", rate="600", rate_unit="hour",
                 param_order=None, param_percent="20")  # fmt: skip
    hours = {**paced, "sending_hours_start": "09:00", "sending_hours_end": "20:00"}
    with time_machine.travel(NOW, tick=False):
        pages = [
            client.post(PREFLIGHT, data, headers={"HX-Request": "true"}).content.decode() for data in (paced, hours)
        ]

    assert "Expected pace <strong>600 messages an hour</strong>" in pages[0]
    assert 'id="pf-duration"' not in pages[0] and "outside the sending hours" not in pages[0]
    assert "recipients outside the sending hours wait for them; the recipients' own quiet hours" in pages[1]


@pytest.mark.django_db
@pytest.mark.parametrize(("typed", "shown"), [("500", "500"), ("7000", "7,000")])
def test_a_rate_per_hour_reopens_per_hour_and_reads_per_hour_not_as_a_rounded_rate_a_second(
    client, marketer, demo_data, typed, shown
):
    # 7,000 an hour is 1.9444… a second: shown as "1.94444" per second, saving the form unchanged made it
    # 6,999.98 an hour (another hash), and the pre-flight and review said "1.94 messages a second".
    client.force_login(marketer)
    client.post(NEW, form(list_segment(name="Paced"), rate=typed, rate_unit="hour"))
    campaign = Campaign.objects.get()

    page = client.get(f"/campaigns/{campaign.pk}/edit").content.decode()

    assert f'name="rate" class="tpl-input" min="0" step="any" value="{typed}"' in page
    assert '<option value="hour" selected>hour</option>' in page
    client.post(f"/campaigns/{campaign.pk}/edit", form(campaign.segment, rate=typed, rate_unit="hour"))
    campaign.refresh_from_db()
    assert campaign.rate_per_second * 3600 == pytest.approx(int(typed), abs=1e-9)
    assert pacing.describe(campaign) == f"at most {shown} messages/h"
    assert pacing.rate_words(campaign.rate_per_second) == f"{shown} messages an hour"

    live = form(campaign.segment, kind="promo", channel="email", rate=typed, rate_unit="hour", param_order=None,
                param_percent="20")  # fmt: skip
    page = client.post(PREFLIGHT, live, headers={"HX-Request": "true"}).content.decode()
    assert f"Expected pace <strong>{shown} messages an hour</strong>" in page


RATES = [
    (50.0, ("50", "second"), "50 messages a second"),
    (1.5, ("1.5", "second"), "1.5 messages a second"),  # typed per second: stays per second
    (1.0, ("1", "second"), "1 message a second"),
    (0.5, ("1800", "hour"), "1,800 messages an hour"),
    (1 / 3600, ("1", "hour"), "1 message an hour"),
    (1_234_567 / 3600, ("1234567", "hour"), "1,234,567 messages an hour"),  # not "1.23457e+06"
    (1 / 7, ("514.285714", "hour"), "514 messages an hour"),
    (round(7000 / 3600, 6), ("6999.9984", "hour"), "7,000 messages an hour"),  # as the pre-flight keeps it
]


@pytest.mark.parametrize(("per_second", "amount", "words"), RATES)
def test_a_rate_reads_in_the_unit_it_was_most_likely_given_in_without_losing_a_digit(per_second, amount, words):
    assert (pacing.rate_amount(per_second), pacing.rate_words(per_second)) == (amount, words)


@pytest.mark.django_db
def test_a_composer_pace_over_the_budget_is_explained_and_nothing_is_saved(client, marketer, demo_data, budget_35):
    client.force_login(marketer)
    response = client.post(NEW, form(list_segment(name="Too fast"), kind="promo", channel="push", rate="40"))

    assert response.status_code == 422
    assert "40 messages a second is above the push provider budget of 35 a second." in response.content.decode()
    assert not Campaign.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("hours", "message"),
    [("1e308", "A spread window is at most 2,147,483,647 seconds (68 years)."),
     ("-1e308", "A spread window is longer than 0 seconds.")],
)  # fmt: skip
def test_a_spread_too_long_for_any_window_is_explained_not_a_500(client, marketer, demo_data, hours, message):
    """1e308 hours is a finite number whose seconds are not: round(inf) raised, a 500 of the composer."""
    client.force_login(marketer)
    response = client.post(NEW, form(list_segment(name="Forever"), spread_hours=hours))

    assert response.status_code == 422
    assert message in response.content.decode()
    assert not Campaign.objects.exists()


@pytest.mark.django_db
def test_a_paced_preflight_whose_end_is_past_year_9999_says_no_end_not_a_500(client, marketer, demo_data):
    """send_at has no upper bound: at 9999-12-31 23:59 a spread of 2 hours ends past what a datetime holds."""
    client.force_login(marketer)
    late = form(list_segment(name="Late"), kind="promo", channel="email", spread_hours="2", param_order=None,
                param_percent="20", schedule_mode="at", send_at="9999-12-31T23:59")  # fmt: skip
    with time_machine.travel(NOW, tick=False):
        response = client.post(PREFLIGHT, late, headers={"HX-Request": "true"})

    assert response.status_code == 200
    assert "Expected pace" not in response.content.decode()
