"""The running page's pace and why-waiting (campaigns/pace.py): a table of facts → reasons, the pace by the minute."""

from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine

from backend.notifications.delivery import breaker
from backend.notifications.models import Notification, Recipient, State
from campaigns import actions, fanout, pace
from campaigns.models import Campaign
from campaigns.pace import Facts, Minute
from frontend.campaigns import progress
from tests.campaigns_setup import list_segment, submitted

NOW = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)
AT = datetime(2026, 12, 1, 14, 30, tzinfo=UTC)
RUNNING, PAUSED = Campaign.State.RUNNING, Campaign.State.PAUSED

WHY = [
    ("done: never waits", Facts(state=Campaign.State.DONE, unfed=5, queue_depth=900, queue_limit=100), []),
    ("running, feeding freely", Facts(state=RUNNING, unfed=500, queue_depth=20, queue_limit=100), []),
    (
        "paused, by whom and since when",
        Facts(state=PAUSED, paused_at=NOW, paused_by="marketer", unfed=500, queue_depth=900, queue_limit=100),
        [("paused", "Paused by marketer at 2026-12-01 10:00 UTC: nothing is handed to a provider until resumed.")],
    ),
    (
        "paused with rows outside sending hours: both",
        Facts(state=PAUSED, paused_at=NOW, paused_by="approver", scheduled={"sending-hours": (1200, AT)}),
        [
            ("paused", "Paused by approver at 2026-12-01 10:00 UTC: nothing is handed to a provider until resumed."),
            (
                "sending-hours",
                "1,200 wait for the campaign's sending hours in their zone; the first goes at 2026-12-01 14:30 UTC.",
            ),
        ],
    ),
    (
        "the standard queue full: the budget",
        Facts(state=RUNNING, unfed=3000, queue_depth=100, queue_limit=100),
        [("budget", "The standard queue is full (100 tasks, at most 100 fed): 3,000 wait for the providers' budget.")],
    ),
    (
        "its own rate while the queue has room",
        Facts(state=RUNNING, unfed=40, queue_depth=3, queue_limit=100, rate_per_second=50.0),
        [("rate", "Held to its rate of 50 messages a second: 40 wait their turn.")],
    ),
    (
        "a rate per hour is said per hour",
        Facts(state=RUNNING, unfed=28, queue_depth=3, queue_limit=100, rate_per_second=500 / 3600),
        [("rate", "Held to its rate of 500 messages an hour: 28 wait their turn.")],
    ),
    (
        "nothing ready: neither budget nor rate nor breaker",
        Facts(
            state=RUNNING, unfed=0, queue_depth=100, queue_limit=100, rate_per_second=50.0, open_breakers=("twilio",)
        ),
        [],
    ),
    (
        "a breaker open and the queue full",
        Facts(state=RUNNING, unfed=10, queue_depth=150, queue_limit=100, open_breakers=("twilio", "vonage")),
        [
            ("breaker-open", "The circuit breaker of twilio, vonage is open: sending waits for it to close."),
            ("budget", "The standard queue is full (150 tasks, at most 100 fed): 10 wait for the providers' budget."),
        ],
    ),
    (
        "Redis unreachable: no queue or breaker reason",
        Facts(state=RUNNING, unfed=10, queue_depth=None, queue_limit=100),
        [],
    ),
    (
        "spread, waves and quiet hours, in the order of their codes; an unknown reason is left out",
        Facts(
            state=RUNNING,
            scheduled={
                "campaign-spread": (2_700, AT),
                "campaign-wave": (30, AT),
                "quiet-hours": (4, None),
                "retry": (1, AT),
            },
        ),
        [
            ("campaign-spread", "2,700 are spread over the campaign's window; the next goes at 2026-12-01 14:30 UTC."),
            ("campaign-wave", "30 wait for their local-time wave; the next goes at 2026-12-01 14:30 UTC."),
            ("quiet-hours", "4 wait for the end of their recipients' quiet hours; the first at an unknown time."),
        ],
    ),
]


@pytest.mark.parametrize(("case", "facts", "reasons"), WHY, ids=[case for case, _, _ in WHY])
def test_why_a_campaign_waits(case, facts, reasons):
    assert [(reason.code, reason.text) for reason in pace.why_waiting(facts)] == reasons


def utc(hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, 12, 1, hour, minute, second, tzinfo=UTC)


SIX_SECONDS = 600 / 3600  # 600 an hour: one row every 6 s
# At 08:00 (utc(8)), as read by pace.facts.
EARLIEST_END = [
    (
        # The report: 200 rows released at 09:00 at 600 an hour go until 09:00 + 200 × 6 s = 09:20, as the pre-flight
        # says; the page said 09:00.
        "rows released at 09:00 still go at the campaign's rate",
        Facts(
            state=RUNNING,
            rate_per_second=SIX_SECONDS,
            scheduled={"sending-hours": (200, utc(9))},
            last_scheduled=utc(9),
        ),
        utc(9, 20),
    ),
    (
        "without a rate of its own: the last send_at",
        Facts(state=RUNNING, scheduled={"sending-hours": (200, utc(9))}, last_scheduled=utc(9)),
        utc(9),
    ),
    (
        # 630 ready now go first: 08:00 + 630 × 6 s = 09:03; the 200 of 09:00 after them: 09:03 + 1,200 s = 09:23.
        "the rows ready now go before those released later",
        Facts(
            state=RUNNING,
            rate_per_second=SIX_SECONDS,
            unfed=630,
            scheduled={"sending-hours": (200, utc(9))},
            last_scheduled=utc(9),
        ),
        utc(9, 23),
    ),
    (
        # 50 from 08:30 are through at 08:35, before 09:00: the 200 of 09:00 still end at 09:20.
        "rows of an earlier reason through before the later ones open",
        Facts(
            state=RUNNING,
            rate_per_second=SIX_SECONDS,
            scheduled={"quiet-hours": (50, utc(8, 30)), "sending-hours": (200, utc(9))},
            last_scheduled=utc(9),
        ),
        utc(9, 20),
    ),
    (
        # 400 from 08:30 take until 08:30 + 2,400 s = 09:10; the 200 of 09:00 after them: 09:10 + 1,200 s = 09:30.
        "rows of an earlier reason still going when the later ones open",
        Facts(
            state=RUNNING,
            rate_per_second=SIX_SECONDS,
            scheduled={"quiet-hours": (400, utc(8, 30)), "sending-hours": (200, utc(9))},
            last_scheduled=utc(9),
        ),
        utc(9, 30),
    ),
    (
        # Spread from 08:10 to 09:00: 100 at one every 6 s take 600 s from 08:10 (08:20): the last row decides.
        "a spread slower than the rate ends with its last row",
        Facts(
            state=RUNNING,
            rate_per_second=SIX_SECONDS,
            scheduled={"campaign-spread": (100, utc(8, 10))},
            last_scheduled=utc(9),
        ),
        utc(9),
    ),
    ("nothing waits and no rate: no floor", Facts(state=RUNNING, unfed=30), None),
]


@pytest.mark.parametrize(("case", "facts", "end"), EARLIEST_END, ids=[case for case, _, _ in EARLIEST_END])
def test_the_earliest_end_counts_the_released_rows_at_the_campaigns_rate(case, facts, end):
    assert pace.earliest_end(facts, utc(8)) == end


def minutes(*sent: int) -> list[Minute]:
    """The plot's last minutes up to NOW's, ``sent`` in each (oldest first), after zeros."""
    last = NOW.replace(second=0)
    counts = [0] * (pace.PLOT_MINUTES - len(sent)) + list(sent)
    return [Minute(last - timedelta(minutes=pace.PLOT_MINUTES - 1 - k), n) for k, n in enumerate(counts)]


@pytest.mark.parametrize(
    ("sent", "per_minute"),
    [
        ((), 0.0),
        ((300, 300, 300, 300, 300, 150), 1350 / 4.5),  # the last five minutes: 9:56:00 … 10:00:30 is 4.5 min
        ((0, 0, 0, 0, 0, 150), 300.0),  # began this minute, 30 s ago: 150 in half a minute
        ((600, 0, 0, 0, 0, 0), 0.0),  # nothing in the last five minutes
        ((0, 0, 0, 120, 0, 30), 150 / 2.5),  # from its first busy minute, 9:58, to now
    ],
)
def test_the_recent_pace_counts_from_the_first_minute_that_sent(sent, per_minute):
    assert pace.recent_per_minute(minutes(*sent), NOW) == pytest.approx(per_minute)


def at_10_per_minute(began: datetime, now: datetime) -> list[Minute]:
    """The plot at ``now`` of a campaign sending one row every 6 s from ``began`` (600 an hour)."""
    sends = [began + timedelta(seconds=6 * k) for k in range(int((now - began).total_seconds() // 6) + 1)]
    last = now.replace(second=0, microsecond=0)
    plot = [last - timedelta(minutes=pace.PLOT_MINUTES - 1 - k) for k in range(pace.PLOT_MINUTES)]
    return [
        Minute(at, len(inside), min(inside, default=None))
        for at in plot
        for inside in [[s for s in sends if at <= s < at + timedelta(minutes=1)]]
    ]


@pytest.mark.parametrize(
    ("after", "within"), [(timedelta(seconds=20), 0.25), (timedelta(seconds=75), 0.05), (timedelta(minutes=3), 0.04)]
)
def test_a_campaign_that_began_inside_a_minute_reads_its_own_rate_from_its_first_send(after, within):
    # Begun at 10:00:15 at 600 an hour: measured from 10:00:00 it read 6.9 a minute after 20 s, 8.7 after 75 s,
    # 9.5 after 3 minutes (the demo's page said 4, then 8, of a campaign sending 10 a minute).
    began = datetime(2026, 12, 1, 10, 0, 15, tzinfo=UTC)

    per_minute = pace.recent_per_minute(at_10_per_minute(began, began + after), began + after)

    assert per_minute == pytest.approx(10, rel=within)


def test_a_campaign_sending_for_longer_than_the_window_is_measured_over_the_window():
    began, now = datetime(2026, 12, 1, 9, 40, 15, tzinfo=UTC), NOW
    plot = at_10_per_minute(began, now)

    assert pace.recent_per_minute(plot, now) == pytest.approx(sum(m.sent for m in plot[-5:]) / 4.5)


def resumed_minutes(*sent: tuple[int, int]) -> list[Minute]:
    """The plot's last minutes up to NOW's: (sent, of them after the resume) in each, oldest first, after zeros."""
    counts = [(0, 0)] * (pace.PLOT_MINUTES - len(sent)) + list(sent)
    last = NOW.replace(second=0)
    at = [last - timedelta(minutes=pace.PLOT_MINUTES - 1 - k) for k in range(pace.PLOT_MINUTES)]
    return [Minute(start, n, None, after) for start, (n, after) in zip(at, counts, strict=True)]


RESUMED = [
    # 10 a minute (one send every 6 s), the last five minutes 09:56 … 10:00 of NOW = 10:00:30.
    (
        # Paused 09:58:30, resumed 10:00:00: 10 + 10 + 5 before, 5 after (10:00:00 … :24). Counted from 09:56:00
        # over the pause it read 30 / 4.5 = 6.7 a minute (the report); running only since 10:00:00: 5 / 0.5 = 10.
        "paused for 90 s, resumed 30 s ago",
        ((10, 0), (10, 0), (5, 0), (0, 0), (5, 5)),
        datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
        10.0,
    ),
    (
        # Paused 09:57:00, resumed 10:00:00: 10 before, 5 after. 15 / 4.5 = 3.3 before; 5 / 0.5 = 10.
        "paused for 3 minutes, resumed 30 s ago",
        ((10, 0), (0, 0), (0, 0), (0, 0), (5, 5)),
        datetime(2026, 12, 1, 10, 0, tzinfo=UTC),
        10.0,
    ),
    (
        # Paused 09:59:10 (09:59:00 and :06 sent), resumed 09:59:40: :40, :46, :52, :58 and 10:00:04 … :28 after,
        # 9 in the 50 s since the resume: 9 / (50 / 60) = 10.8 a minute.
        "resumed inside a minute that sent before the pause",
        ((10, 0), (10, 0), (10, 0), (6, 4), (5, 5)),
        datetime(2026, 12, 1, 9, 59, 40, tzinfo=UTC),
        10.8,
    ),
    (
        # Resumed 09:55:30, before the window: the five minutes are all running time, 45 / 4.5 = 10.
        "resumed before the window: measured as before",
        ((10, 10), (10, 10), (10, 10), (10, 10), (5, 5)),
        datetime(2026, 12, 1, 9, 55, 30, tzinfo=UTC),
        10.0,
    ),
    (
        # Resumed 10:00:20, nothing sent since: no pace yet (the feeder has not handed any over), not 45 / 4.5.
        "resumed 10 s ago, nothing sent since",
        ((10, 0), (10, 0), (10, 0), (10, 0), (5, 0)),
        datetime(2026, 12, 1, 10, 0, 20, tzinfo=UTC),
        0.0,
    ),
]


@pytest.mark.parametrize(("case", "sent", "resumed", "per_minute"), RESUMED, ids=[case for case, *_ in RESUMED])
def test_the_recent_pace_after_a_resume_counts_only_the_time_since_it(case, sent, resumed, per_minute):
    assert pace.recent_per_minute(resumed_minutes(*sent), NOW, resumed) == pytest.approx(per_minute)


@pytest.fixture
def running(demo_data, marketer, approver) -> Campaign:
    """A promo email campaign to 10 recipients, started and fanned out (10 queued)."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"pc-{n:02d}", email=f"pc{n}@example.com", language="en") for n in range(10)
    )
    campaign = submitted(marketer, segment=list_segment([f"pc-{n:02d}" for n in range(10)], name="Pace audience"))
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    actions.start(campaign)
    fanout.fan_out(campaign.pk)
    return Campaign.objects.get(pk=campaign.pk)


def sent_at(campaign: Campaign, *instants: datetime) -> None:
    ids = list(Notification.objects.filter(campaign=campaign, state=State.QUEUED).values_list("pk", flat=True))
    for pk, at in zip(ids, instants, strict=False):
        Notification.objects.filter(pk=pk).update(state=State.SENT, sent_at=at)


def test_the_pace_counts_each_minute_of_the_last_hour_and_expects_the_end_at_it(running):
    sent_at(running, NOW - timedelta(minutes=90), NOW - timedelta(minutes=2), NOW - timedelta(seconds=100),
            NOW - timedelta(seconds=20), NOW - timedelta(seconds=10))  # fmt: skip

    going = pace.pace(running, remaining=5, now=NOW)

    assert len(going.minutes) == 60 and going.minutes[-1].at == datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    assert [(m.at.strftime("%H:%M"), m.sent) for m in going.minutes if m.sent] == [
        ("09:58", 2), ("10:00", 2)
    ]  # fmt: skip
    # Sending began at 09:58:30 (09:57 sent nothing): 4 sent in the 2 minutes since.
    assert going.per_minute == pytest.approx(4 / 2)
    assert going.expected_end == NOW + timedelta(minutes=5 / (4 / 2))


def test_rows_waiting_for_later_push_the_expected_end_to_the_last_of_them(running, client, marketer):
    rows = list(Notification.objects.filter(campaign=running).order_by("pk").values_list("pk", flat=True))
    Notification.objects.filter(pk__in=rows[5:]).update(state=State.SCHEDULED, reason="sending-hours", send_at=AT)
    sent_at(running, NOW - timedelta(seconds=20), NOW - timedelta(seconds=10))

    last = pace.facts(running).last_scheduled
    assert last == AT
    assert pace.pace(running, remaining=8, now=NOW, not_before=last).expected_end == AT
    with time_machine.travel(NOW, tick=False):
        html = client_as(client, marketer).get(f"/campaigns/{running.pk}/progress").content.decode()
    assert '<span id="expected-end"><time datetime="2026-12-01T14:30:00+00:00">2026-12-01 14:30 UTC</time>' in html
    assert 'id="progress-eta"' not in html  # one end, not an ETA that forgets the rows waiting for 14:30


def test_the_page_names_the_campaigns_pace(client, demo_data, marketer, approver):
    campaign = submitted(marketer, rate_per_second=500 / 3600, sending_hours_start=time(9), sending_hours_end=time(20))
    html = client_as(client, marketer).get(f"/campaigns/{campaign.pk}/").content.decode()

    expected = "at most 500 messages/h · sending hours 09:00–20:00 in each recipient&#x27;s local time"
    assert f'<dt>Pace</dt><dd id="campaign-pacing">{expected}</dd>' in html


def client_as(client, user):
    client.force_login(user)
    return client


def test_a_paused_campaign_has_no_expected_end(running, marketer):
    sent_at(running, NOW - timedelta(seconds=20))
    actions.pause(running, marketer)

    assert pace.pace(Campaign.objects.get(pk=running.pk), remaining=9, now=NOW).expected_end is None


def test_the_facts_of_a_campaign_come_from_its_rows_the_queue_and_the_breakers(running, marketer, stub_providers):
    rows = list(Notification.objects.filter(campaign=running).order_by("pk"))
    Notification.objects.filter(pk__in=[n.pk for n in rows[:3]]).update(
        state=State.SCHEDULED, reason="sending-hours", send_at=AT
    )
    Notification.objects.filter(pk=rows[3].pk).update(
        state=State.SCHEDULED, reason="sending-hours", send_at=AT - timedelta(hours=1)
    )
    fanout.feed(limit=2)

    facts = pace.facts(Campaign.objects.get(pk=running.pk))

    assert facts.scheduled == {"sending-hours": (4, AT - timedelta(hours=1))}
    assert (facts.unfed, facts.queue_depth, facts.open_breakers) == (4, 2, ())
    actions.pause(running, marketer)
    paused = pace.facts(Campaign.objects.get(pk=running.pk))
    assert (paused.state, paused.paused_by, paused.unfed) == (PAUSED, "marketer", 6)


def test_an_open_breaker_of_the_channels_provider_is_a_reason(running, stub_providers, settings):
    for _ in range(settings.NOTIFY["BREAKER_CONSECUTIVE_FAILURES"]):
        breaker.record("twilio", ok=False)
    running.channel = "sms"

    assert pace.facts(running).open_breakers == ("twilio",)


def test_the_page_shows_the_pace_plot_the_expected_end_and_why_it_waits(client, running, marketer, settings):
    settings.NOTIFY = {**settings.NOTIFY, "CAMPAIGN_FEED": 2}
    with time_machine.travel(NOW, tick=False):
        sent_at(running, NOW - timedelta(seconds=20), NOW - timedelta(seconds=10))
        fanout.feed()
        client.force_login(marketer)
        html = client.get(f"/campaigns/{running.pk}/progress").content.decode()

    assert 'id="pace-per-minute">6<' in html  # 2 sent in the 20 s since the first
    assert '<time datetime="2026-12-01T10:01:50+00:00">2026-12-01 10:01 UTC</time>' in html  # 8 left at 6/min
    assert html.count("<rect ") == 60 and "<title>10:00 UTC: 2 sent</title>" in html
    assert 'data-reason="budget">The standard queue is full (2 tasks, at most 2 fed): 6 wait' in html


def test_the_page_says_paused_and_expects_no_end(client, running, marketer):
    actions.pause(running, marketer)
    client.force_login(marketer)
    html = client.get(f"/campaigns/{running.pk}/").content.decode()

    assert 'id="expected-end">none while paused<' in html
    assert 'data-reason="paused">Paused by marketer at ' in html


def test_a_campaign_not_started_has_no_pace(client, demo_data, marketer):
    campaign = submitted(marketer)
    client.force_login(marketer)
    html = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="pace"' not in html and 'id="why-waiting"' not in html


def test_bars_scale_to_the_busiest_minute():
    bars = progress.pace_bars(minutes(10, 0, 5))
    assert (bars[-3].y, bars[-3].height, bars[-1].height, bars[0].height) == (0.0, 48.0, 24.0, 0.0)
    assert [bar.x for bar in bars[:3]] == [0, 4, 8]
    assert bars[-1].label == "10:00 UTC: 5 sent"


def test_the_expected_end_after_a_resume_leaves_the_pause_out(client, running, marketer):
    with time_machine.travel(datetime(2026, 12, 1, 9, 57, tzinfo=UTC), tick=False):
        actions.pause(running, marketer)
    with time_machine.travel(datetime(2026, 12, 1, 10, 0, tzinfo=UTC), tick=False):
        actions.resume(running, marketer)
    sent_at(running, datetime(2026, 12, 1, 9, 56, tzinfo=UTC), datetime(2026, 12, 1, 9, 56, 30, tzinfo=UTC),
            datetime(2026, 12, 1, 10, 0, 6, tzinfo=UTC), datetime(2026, 12, 1, 10, 0, 18, tzinfo=UTC))  # fmt: skip

    with time_machine.travel(NOW, tick=False):
        html = client_as(client, marketer).get(f"/campaigns/{running.pk}/progress").content.decode()

    # 2 sent in the 30 s since the resume at 10:00:00: 4 a minute, 6 left: 1.5 minutes, 10:02:00. Counted from
    # 09:56:00 over the pause it was 4 in 4.5 minutes (0.9 a minute) and 10:07:15.
    assert 'id="pace-per-minute">4<' in html
    assert '<time datetime="2026-12-01T10:02:00+00:00">2026-12-01 10:02 UTC</time>' in html


def test_a_rate_limited_campaigns_end_is_after_its_released_rows_go_at_its_rate(running, client, marketer):
    Campaign.objects.filter(pk=running.pk).update(rate_per_second=600 / 3600)
    rows = list(Notification.objects.filter(campaign=running).order_by("pk").values_list("pk", flat=True))
    Notification.objects.filter(pk__in=rows[2:]).update(state=State.SCHEDULED, reason="sending-hours", send_at=AT)
    sent_at(running, NOW - timedelta(seconds=20), NOW - timedelta(seconds=10))

    with time_machine.travel(NOW, tick=False):
        html = client_as(client, marketer).get(f"/campaigns/{running.pk}/progress").content.decode()

    # 8 wait for 14:30 and go at 600 an hour, one every 6 s: 14:30 + 48 s, not 14:30.
    assert '<span id="expected-end"><time datetime="2026-12-01T14:30:48+00:00">2026-12-01 14:30 UTC</time>' in html
