"""When a campaign's notifications go (campaigns/fanout.py): local-time waves, quiet hours, rate limits, release, end.

Instants are worked out by hand from each zone's offset on the day (IANA rules): Asia/Tehran is
+03:30 all year (no DST since 2022), Asia/Kolkata +05:30; New York springs forward on Sunday
8 March 2026 at 02:00 EST (−05:00 → −04:00), London on Sunday 29 March 2026 at 01:00 GMT (→ +01:00).
"""

from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine

from backend.notifications.delivery import dispatch
from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Kind, Notification, Recipient, State, StateChange
from backend.notifications.queues import HUEYS
from campaigns import actions, fanout
from campaigns.fanout import Timing, send_timing
from campaigns.models import Campaign, CampaignAudit, ScheduleMode
from tests.campaigns_setup import list_segment, submitted
from tests.processes import run_embedded


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# --- the numeric rules, one row each -------------------------------------------------------------

# 00:00 EST in New York on its spring-forward day (05:00Z); 08:30 in Tehran, 10:30 in Kolkata.
US_DST_DAY = utc(2026, 3, 8, 5)
# 00:00 GMT in London on its spring-forward day.
EU_DST_DAY = utc(2026, 3, 29)
NIGHT = (time(22), time(7))  # quiet hours across midnight


@pytest.mark.parametrize(
    ("case", "now", "zone", "quiet", "wall", "end_at", "expected"),
    [
        ("09:00 EDT, not EST", US_DST_DAY, "America/New_York", (None, None), time(9), None,
         Timing(utc(2026, 3, 8, 13), "campaign-wave", False)),
        ("02:30 does not exist in NY that night: 03:00 EDT", US_DST_DAY, "America/New_York", (None, None),
         time(2, 30), None, Timing(utc(2026, 3, 8, 7), "campaign-wave", False)),
        ("Tehran +03:30", US_DST_DAY, "Asia/Tehran", (None, None), time(9), None,
         Timing(utc(2026, 3, 8, 5, 30), "campaign-wave", False)),
        ("Kolkata +05:30, 09:00 passed: tomorrow", US_DST_DAY, "Asia/Kolkata", (None, None), time(9), None,
         Timing(utc(2026, 3, 9, 3, 30), "campaign-wave", False)),
        ("09:00 BST on London's DST day", EU_DST_DAY, "Europe/London", (None, None), time(9), None,
         Timing(utc(2026, 3, 29, 8), "campaign-wave", False)),
        ("London's 01:30 does not exist: 02:00 BST", EU_DST_DAY, "Europe/London", (None, None), time(1, 30), None,
         Timing(utc(2026, 3, 29, 1), "campaign-wave", False)),
        ("a wave at the start goes at once", utc(2026, 3, 8, 5, 30), "Asia/Tehran", (None, None), time(9), None,
         Timing(None, "", False)),
        ("now, outside quiet hours", utc(2026, 3, 10, 12), "Asia/Tehran", NIGHT, None, None, Timing(None, "", False)),
        ("now, 06:30 in Tehran inside 22–07: 07:00", utc(2026, 3, 10, 3), "Asia/Tehran", NIGHT, None, None,
         Timing(utc(2026, 3, 10, 3, 30), "quiet-hours", False)),
        ("now, 23:30 in Kolkata: 07:00 the next day", utc(2026, 3, 10, 18), "Asia/Kolkata", NIGHT, None, None,
         Timing(utc(2026, 3, 11, 1, 30), "quiet-hours", False)),
        ("a 23:00 wave inside Tehran's 22–07: 07:00 the next day", utc(2026, 3, 10), "Asia/Tehran", NIGHT, time(23),
         None, Timing(utc(2026, 3, 11, 3, 30), "quiet-hours", False)),
        ("quiet hours ending at 02:30 on NY's spring-forward night end at 03:00 EDT", utc(2026, 3, 8, 6),
         "America/New_York", (time(22), time(2, 30)), None, None, Timing(utc(2026, 3, 8, 7), "quiet-hours", False)),
        ("a wave after the end time is never sent", US_DST_DAY, "Asia/Kolkata", (None, None), time(9),
         utc(2026, 3, 8, 12), Timing(utc(2026, 3, 9, 3, 30), "campaign-wave", True)),
        ("a wave exactly at the end time is never sent", US_DST_DAY, "Asia/Tehran", (None, None), time(9),
         utc(2026, 3, 8, 5, 30), Timing(utc(2026, 3, 8, 5, 30), "campaign-wave", True)),
        ("quiet hours pushing past the end time", utc(2026, 3, 10, 3), "Asia/Tehran", NIGHT, None,
         utc(2026, 3, 10, 3, 15), Timing(utc(2026, 3, 10, 3, 30), "quiet-hours", True)),
        ("due now, after the end time", utc(2026, 3, 10, 12), "UTC", (None, None), None, utc(2026, 3, 10, 11),
         Timing(None, "", True)),
        ("an unknown zone is UTC", US_DST_DAY, "Not/AZone", (None, None), time(9), None,
         Timing(utc(2026, 3, 8, 9), "campaign-wave", False)),
    ],
)  # fmt: skip
def test_each_recipient_goes_at_the_instant_worked_out_by_hand(case, now, zone, quiet, wall, end_at, expected):
    timing = send_timing(
        now=now, zone=zone, quiet_start=quiet[0], quiet_end=quiet[1], local_time=wall, start=now, end_at=end_at
    )
    assert timing == expected, case


# --- the fan-out ---------------------------------------------------------------------------------

ZONES = {
    "t-ny": "America/New_York",
    "t-tehran": "Asia/Tehran",
    "t-kolkata": "Asia/Kolkata",
    "t-london": "Europe/London",
    "t-tehran-2": "Asia/Tehran",
}


@pytest.fixture
def zoned(demo_data) -> list[str]:
    """One recipient per zone of ZONES (two in Tehran), English, with an email address and no quiet hours."""
    Recipient.objects.bulk_create(
        Recipient(user_id=user_id, email=f"{user_id}@example.com", language="en", time_zone=zone)
        for user_id, zone in ZONES.items()
    )
    return list(ZONES)


def approved(marketer, approver, users, **fields) -> Campaign:
    campaign = submitted(marketer, segment=list_segment(users, name="Timing audience"), **fields)
    return actions.approve(campaign, approver, campaign.content_hash)


def local_nine(marketer, approver, users, **fields) -> Campaign:
    """An approved promo email campaign at 09:00 in each recipient's local time."""
    return approved(marketer, approver, users, schedule_mode=ScheduleMode.LOCAL_TIME, local_time=time(9), **fields)


def rows(campaign: Campaign) -> dict[str, tuple]:
    """user id → (state, reason, send_at) of the campaign's notifications."""
    made = Notification.objects.filter(campaign=campaign).select_related("recipient")
    return {n.recipient.user_id: (n.state, n.reason, n.send_at) for n in made}


def test_local_time_waves_are_each_zones_instant_on_a_dst_day(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        fanout.tick()

    campaign.refresh_from_db()
    assert campaign.state == "running"
    assert rows(campaign) == {
        "t-ny": ("scheduled", "campaign-wave", utc(2026, 3, 8, 13)),  # 09:00 EDT: the clocks sprang forward at 07:00Z
        "t-tehran": ("scheduled", "campaign-wave", utc(2026, 3, 8, 5, 30)),
        "t-tehran-2": ("scheduled", "campaign-wave", utc(2026, 3, 8, 5, 30)),
        "t-kolkata": ("scheduled", "campaign-wave", utc(2026, 3, 9, 3, 30)),  # 10:30 there at the start: tomorrow
        "t-london": ("scheduled", "campaign-wave", utc(2026, 3, 8, 9)),
    }
    history = StateChange.objects.filter(notification__campaign=campaign)
    assert set(history.values_list("from_state", "to_state", "reason")) == {("", "scheduled", "campaign-wave")}
    assert HUEYS["standard"].pending_count() == 0


def test_the_schedule_audit_row_keeps_the_waves_from_the_start(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        assert fanout.start_due() == [campaign.pk]

    schedule = CampaignAudit.objects.get(campaign=campaign, action="schedule")
    assert schedule.actor_name == "scheduler"
    assert schedule.detail == {
        "start": "2026-03-08T05:00:00Z",
        "local_time": "09:00",
        "end_at": None,
        "waves": [
            {"at": "2026-03-08T05:30:00Z", "utc_offset": "UTC+03:30", "zones": ["Asia/Tehran"], "size": 2},
            {"at": "2026-03-08T09:00:00Z", "utc_offset": "UTC+00:00", "zones": ["Europe/London"], "size": 1},
            {"at": "2026-03-08T13:00:00Z", "utc_offset": "UTC−04:00", "zones": ["America/New_York"], "size": 1},
            {"at": "2026-03-09T03:30:00Z", "utc_offset": "UTC+05:30", "zones": ["Asia/Kolkata"], "size": 1},
        ],
    }


def test_london_waves_on_its_own_dst_day(zoned, marketer, approver):
    with time_machine.travel(EU_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, ["t-london", "t-ny"])
        fanout.tick()

    assert rows(campaign) == {
        "t-london": ("scheduled", "campaign-wave", utc(2026, 3, 29, 8)),  # 09:00 BST
        "t-ny": ("scheduled", "campaign-wave", utc(2026, 3, 29, 13)),  # 09:00 EDT
    }


def test_a_batch_made_later_keeps_the_waves_of_the_start(zoned, marketer, approver):
    """Waves count from the campaign's start, not from when each batch is made."""
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        fanout.start_due()
    with time_machine.travel(utc(2026, 3, 8, 5, 10), tick=False):
        fanout.fan_out(campaign.pk)

    assert rows(campaign)["t-tehran"] == ("scheduled", "campaign-wave", utc(2026, 3, 8, 5, 30))
    assert rows(campaign)["t-kolkata"] == ("scheduled", "campaign-wave", utc(2026, 3, 9, 3, 30))


def test_quiet_hours_across_midnight_defer_to_their_end(zoned, marketer, approver):
    Recipient.objects.filter(user_id__in=["t-kolkata", "t-tehran"]).update(
        quiet_hours_start=time(22), quiet_hours_end=time(7)
    )
    # 20:00Z: 01:30 in Kolkata (inside 22–07), 23:30 in Tehran (inside), 16:00 in New York.
    with time_machine.travel(utc(2026, 3, 10, 20), tick=False):
        campaign = approved(marketer, approver, zoned)
        fanout.tick()

    assert rows(campaign) == {
        "t-kolkata": ("scheduled", "quiet-hours", utc(2026, 3, 11, 1, 30)),  # 07:00 IST
        "t-tehran": ("scheduled", "quiet-hours", utc(2026, 3, 11, 3, 30)),  # 07:00 IRST, the next day
        "t-tehran-2": ("queued", "", None),  # no quiet hours
        "t-ny": ("queued", "", None),
        "t-london": ("queued", "", None),
    }


def test_a_wave_inside_quiet_hours_waits_for_their_end(zoned, marketer, approver):
    Recipient.objects.filter(user_id="t-tehran").update(quiet_hours_start=time(22), quiet_hours_end=time(7))
    with time_machine.travel(utc(2026, 3, 10), tick=False):
        campaign = approved(
            marketer, approver, ["t-tehran", "t-tehran-2"], schedule_mode=ScheduleMode.LOCAL_TIME, local_time=time(23)
        )
        fanout.tick()

    assert rows(campaign) == {
        "t-tehran": ("scheduled", "quiet-hours", utc(2026, 3, 11, 3, 30)),
        "t-tehran-2": ("scheduled", "campaign-wave", utc(2026, 3, 10, 19, 30)),  # 23:00 IRST
    }


def test_a_recipient_at_their_rate_limit_is_suppressed(zoned, marketer, approver, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1, "d": 2}}}
    promo = Kind.objects.get(name="promo")
    now = utc(2026, 3, 10, 12)

    def earlier(user_id: str, ago: timedelta, state: str = State.SENT) -> None:
        Notification.objects.create(
            idempotency_key=f"{user_id}-{ago}", idempotency_scope="client:test", request_hash="x",
            recipient=Recipient.objects.get(user_id=user_id), kind=promo, channel="email", priority="standard",
            state=state,
        )  # fmt: skip
        Notification.objects.filter(idempotency_key=f"{user_id}-{ago}").update(created_at=now - ago)

    earlier("t-ny", timedelta(minutes=10))  # 1 this hour: the hourly limit is reached
    earlier("t-london", timedelta(hours=2))  # 1 today: room left
    earlier("t-tehran", timedelta(hours=2))
    earlier("t-tehran", timedelta(hours=3))  # 2 today: the daily limit is reached
    earlier("t-kolkata", timedelta(minutes=5), state=State.SUPPRESSED)  # stopped ones are not counted
    earlier("t-tehran-2", timedelta(hours=25))  # outside both windows
    with time_machine.travel(now, tick=False):
        campaign = approved(marketer, approver, zoned)
        fanout.tick()

    assert {user: state_reason[:2] for user, state_reason in rows(campaign).items()} == {
        "t-ny": ("suppressed", "rate-limited"),
        "t-tehran": ("suppressed", "rate-limited"),
        "t-london": ("queued", ""),
        "t-kolkata": ("queued", ""),
        "t-tehran-2": ("queued", ""),
    }


def test_the_live_path_counts_a_campaigns_notifications_against_the_limit(
    demo_data, marketer, approver, send, settings
):
    """The fan-out counts live sends in SQL; the live path counts the campaign's rows (not in Redis) the same way."""
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1, "d": 10}}}
    campaign = approved(marketer, approver, ["u-en-1"])
    fanout.tick()
    assert rows(campaign)["u-en-1"][:2] == ("queued", "")

    response = send({"user_id": "u-en-1", "kind": "promo", "params": {"percent": "5"}}, key="promo-after-campaign")

    # promo folds what is over its limit into a digest (policy._over_limit): not sent on its own.
    assert (response.json()["state"], response.json()["reason"]) == ("suppressed", "digested")


def test_the_release_at_a_wave_moves_exactly_that_waves_rows(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        fanout.tick()
    with time_machine.travel(utc(2026, 3, 8, 5, 29, 59), tick=False):
        assert fanout.release_due() == 0

    with time_machine.travel(utc(2026, 3, 8, 5, 30), tick=False):
        fanout.tick()

    states = {user: state for user, (state, _, _) in rows(campaign).items()}
    assert states == {
        "t-tehran": "queued", "t-tehran-2": "queued",
        "t-ny": "scheduled", "t-kolkata": "scheduled", "t-london": "scheduled",
    }  # fmt: skip
    released = Notification.objects.filter(campaign=campaign, state=State.QUEUED)
    assert set(released.values_list("reason", flat=True)) == {"send-at-reached"}
    assert HUEYS["standard"].pending_count() == 2  # the feeder handed exactly those over
    moves = StateChange.objects.filter(notification__campaign=campaign, from_state="scheduled")
    assert sorted(moves.values_list("notification__recipient__user_id", "to_state", "reason")) == [
        ("t-tehran", "queued", "send-at-reached"),
        ("t-tehran-2", "queued", "send-at-reached"),
    ]


def test_a_release_is_paced_by_the_feeder(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        fanout.tick()

    with time_machine.travel(utc(2026, 3, 10), tick=False):
        assert fanout.release_due(limit=3) == 3
        assert fanout.release_due(limit=3) == 2
        assert fanout.feed(limit=4) == 4

    waiting = Notification.objects.filter(campaign=campaign, state=State.QUEUED, queued_at__isnull=True)
    assert waiting.count() == 1


def test_the_sweeper_leaves_due_campaign_rows_to_the_tick(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        fanout.tick()

    report = sweep(now=utc(2026, 3, 10), tiers=["standard"])

    assert report.due_scheduled == 0
    assert Notification.objects.filter(campaign=campaign, state=State.SCHEDULED).count() == len(ZONES)
    assert HUEYS["standard"].pending_count() == 0


def test_a_campaign_with_a_wave_tomorrow_stays_running(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned)
        fanout.tick()
    today = Notification.objects.filter(campaign=campaign, send_at__lt=utc(2026, 3, 9))
    today.update(state=State.SENT)

    with time_machine.travel(utc(2026, 3, 8, 23), tick=False):
        fanout.tick()

    campaign.refresh_from_db()
    assert campaign.state == "running"
    assert Notification.objects.get(campaign=campaign, state=State.SCHEDULED).recipient.user_id == "t-kolkata"


def test_waves_after_the_end_time_are_expired_at_creation(zoned, marketer, approver):
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned, end_at=utc(2026, 3, 8, 12))
        fanout.tick()

    made = rows(campaign)
    assert made["t-ny"] == ("expired", "campaign-ended", utc(2026, 3, 8, 13))
    assert made["t-kolkata"] == ("expired", "campaign-ended", utc(2026, 3, 9, 3, 30))
    assert made["t-london"] == ("scheduled", "campaign-wave", utc(2026, 3, 8, 9))
    expired = Notification.objects.filter(campaign=campaign, state=State.EXPIRED)
    assert set(expired.values_list("expired_at", flat=True)) == {US_DST_DAY}


def test_at_the_end_time_the_rest_expires_and_nothing_fed_is_sent(zoned, marketer, approver, smtp_sink):
    end_at = utc(2026, 3, 8, 10)
    with time_machine.travel(US_DST_DAY, tick=False):
        campaign = local_nine(marketer, approver, zoned, end_at=end_at)
        fanout.tick()
    with time_machine.travel(utc(2026, 3, 8, 5, 30), tick=False):
        fanout.tick()  # Tehran's wave: released and fed
        # t-tehran's by name: both Tehran rows were made at the same frozen instant, so no order tells them apart.
        first = Notification.objects.get(campaign=campaign, state=State.QUEUED, recipient__user_id="t-tehran")
        dispatch.deliver(str(first.pk))  # one delivered before the end
    with time_machine.travel(utc(2026, 3, 8, 9), tick=False):
        fanout.tick()  # London's wave: released and fed, not yet delivered
    fed = list(
        Notification.objects.filter(campaign=campaign, state=State.QUEUED, queued_at__isnull=False).values_list(
            "pk", flat=True
        )
    )
    assert len(fed) == 2  # the other Tehran row and London's

    with time_machine.travel(end_at + timedelta(seconds=1), tick=False):
        fanout.tick()
        for pk in fed:  # the workers pop the tasks fed before the end
            dispatch.deliver(str(pk))

    assert len(smtp_sink.messages()) == 1
    assert {user: state for user, (state, _, _) in rows(campaign).items()} == {
        "t-tehran": "sent", "t-tehran-2": "expired", "t-london": "expired", "t-ny": "expired", "t-kolkata": "expired",
    }  # fmt: skip
    ended = StateChange.objects.filter(notification__campaign=campaign, to_state="expired", from_state="queued")
    assert ended.count() == 2 and set(ended.values_list("reason", flat=True)) == {"campaign-ended"}
    end = CampaignAudit.objects.get(campaign=campaign, action="end")
    assert end.detail == {"end_at": "2026-03-08T10:00:00Z", "counts": {"sent": 1, "expired": 4}}
    campaign.refresh_from_db()
    assert campaign.state == "done"
    assert fanout.feed(limit=10) == 0


def test_a_queued_row_whose_campaign_ended_is_not_claimed(zoned, marketer, approver, smtp_sink):
    """The worker claims only a row still queued: a fed task of a row expired by the end is dropped."""
    with time_machine.travel(utc(2026, 3, 10, 12), tick=False):
        campaign = approved(marketer, approver, ["t-london"], end_at=utc(2026, 3, 10, 13))
        fanout.tick()
    row = Notification.objects.get(campaign=campaign)
    assert (row.state, row.queued_at is not None) == ("queued", True)
    with time_machine.travel(utc(2026, 3, 10, 13), tick=False):
        assert fanout.end_due() == [campaign.pk]

    dispatch.deliver(str(row.pk))

    row.refresh_from_db()
    assert (row.state, row.reason, row.attempt_count) == ("expired", "campaign-ended", 0)
    assert smtp_sink.messages() == []


def test_nothing_is_fed_once_the_end_time_came(zoned, marketer, approver):
    with time_machine.travel(utc(2026, 3, 10, 12), tick=False):
        campaign = approved(marketer, approver, zoned, end_at=utc(2026, 3, 10, 13))
        fanout.fan_out(campaign.pk)
    with time_machine.travel(utc(2026, 3, 10, 13), tick=False):
        assert fanout.feed(limit=100) == 0


# --- the embedded default ------------------------------------------------------------------------

# Run in a process of its own on SQLite (the embedded default: no Redis, Huey on SQLite).
EMBEDDED = """
import io, json
from datetime import UTC, datetime, time
import time_machine
from django.contrib.auth.models import User
from django.core.management import call_command
from backend.notifications.models import Notification, Recipient, StateChange
from campaigns import actions, fanout
from tests.campaigns_setup import list_segment, submitted

call_command("demo_data", stdout=io.StringIO())
for user_id, zone in [("s-tehran", "Asia/Tehran"), ("s-kolkata", "Asia/Kolkata"), ("s-ny", "America/New_York")]:
    Recipient.objects.create(user_id=user_id, email=f"{user_id}@example.com", language="en", time_zone=zone)
Recipient.objects.filter(user_id="s-ny").update(quiet_hours_start=time(8), quiet_hours_end=time(10))
out = {}
with time_machine.travel(datetime(2026, 3, 8, 5, tzinfo=UTC), tick=False):
    campaign = submitted(User.objects.get(username="marketer"), schedule_mode="local_time", local_time=time(9),
                         segment=list_segment(["s-tehran", "s-kolkata", "s-ny"]))
    actions.approve(campaign, User.objects.get(username="approver"), campaign.content_hash)
    fanout.tick()
    out["made"] = sorted([n.recipient.user_id, n.state, n.reason, n.send_at.isoformat()]
                         for n in Notification.objects.filter(campaign=campaign).select_related("recipient"))
with time_machine.travel(datetime(2026, 3, 8, 5, 30, tzinfo=UTC), tick=False):
    fanout.tick()
    out["released"] = sorted(Notification.objects.filter(campaign=campaign, state="queued")
                             .values_list("recipient__user_id", flat=True))
    out["history"] = StateChange.objects.filter(notification__campaign=campaign).count()
print("RESULT" + json.dumps(out))
"""


def test_the_embedded_default_sqlite_makes_and_releases_waves(tmp_path):
    result = run_embedded(tmp_path, EMBEDDED)

    assert result["made"] == [
        ["s-kolkata", "scheduled", "campaign-wave", "2026-03-09T03:30:00+00:00"],
        # 09:00 EDT falls inside the quiet hours 08:00–10:00: their end, 10:00 EDT.
        ["s-ny", "scheduled", "quiet-hours", "2026-03-08T14:00:00+00:00"],
        ["s-tehran", "scheduled", "campaign-wave", "2026-03-08T05:30:00+00:00"],
    ]
    assert result["released"] == ["s-tehran"]
    assert result["history"] == 4
