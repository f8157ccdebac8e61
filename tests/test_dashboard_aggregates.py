"""The dashboard's figures (backend/notifications/aggregates.py), each worked out by hand from rows placed in time."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from itertools import count

import pytest
import time_machine
from django.db import connection

from backend.notifications import actions, aggregates
from backend.notifications.aggregates import WINDOWS
from backend.notifications.delivery import breaker
from backend.notifications.models import Attempt, DeadLetter, Kind, Notification, State, StateChange
from campaigns.models import Campaign, Segment

pytestmark = pytest.mark.usefixtures("demo_data")

NOW = datetime(2026, 11, 30, 12, 30, 30, tzinfo=UTC)
HOUR, DAY = WINDOWS["hour"], WINDOWS["day"]


def at(hh: int, mm: int, ss: float = 0, day: int = 30) -> datetime:
    return datetime(2026, 11, day, hh, mm, tzinfo=UTC) + timedelta(seconds=ss)


@pytest.fixture(autouse=True)
def frozen():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def make(send):
    """A notification accepted through the API, then moved in time with ``.update()``."""
    numbers = count(1)

    def _make(**fields) -> Notification:
        users = ("u-en-1", "u-ar-1", "u-fa-1")
        number = next(numbers)
        body = {"user_id": users[number % 3], "kind": "shipped", "params": {"order": str(number)}}
        response = send(body, key=f"dash-{number}")
        assert response.status_code == 202, response.content
        Notification.objects.filter(pk=response.json()["id"]).update(**fields)
        return Notification.objects.get(pk=response.json()["id"])

    return _make


def attempt(notification: Notification, provider: str, started_at: datetime, result: str = "", **fields) -> Attempt:
    return Attempt.objects.create(
        notification=notification, number=1, provider=provider, started_at=started_at, result=result, **fields
    )


def test_the_windows_cut_the_hour_in_minutes_and_the_day_and_week_in_hours():
    hour, day, week = (aggregates.buckets(WINDOWS[name], NOW) for name in ("hour", "day", "week"))
    assert (len(hour), hour[0], hour[-1]) == (60, at(11, 31), at(12, 30))
    assert (len(day), day[0], day[-1]) == (24, at(13, 0, day=29), at(12, 0))
    assert (len(week), week[0], week[-1]) == (168, at(13, 0, day=23), at(12, 0))


def test_sent_per_channel_counts_each_minute_by_sent_at(make):
    make(channel="email", sent_at=at(12, 29, 10))
    make(channel="email", sent_at=at(12, 29, 50))
    make(channel="sms", sent_at=at(12, 30, 5))
    make(channel="sms", sent_at=at(11, 30, 59))  # a second before the hour's first minute
    make(channel="push")  # never handed to a provider

    assert aggregates.sent_per_channel(HOUR, NOW) == {"email": [0] * 58 + [2, 0], "sms": [0] * 59 + [1]}
    assert aggregates.sent_per_channel(DAY, NOW) == {"email": [0] * 23 + [2], "sms": [0] * 22 + [1, 1]}


def test_latency_is_p50_and_p95_per_tier_from_acceptance_or_the_deferred_send_at(make):
    for ms in (100, 400, 200):
        make(priority="high", created_at=at(12, 29), sent_at=at(12, 29, ms / 1000))
    # Deferred to 12:20 (quiet hours): its latency runs from send_at, not from acceptance at 12:00.
    make(priority="standard", created_at=at(12, 0), send_at=at(12, 20), sent_at=at(12, 20, 1.5))
    # A paced campaign's row, fanned out at 10:00 and handed over in its turn: not an API send, left out.
    segment = Segment.objects.create(name="everyone", kind=Segment.Kind.LIST)
    paced = Campaign.objects.create(name="Paced", kind=Kind.objects.get(name="shipped"), channel="sms", segment=segment)
    make(priority="standard", created_at=at(10, 0), sent_at=at(12, 20, 0.5), campaign=paced)

    latency = aggregates.latency_per_tier(HOUR, NOW)

    # p50 of 100/200/400 is 200; p95 sits 0.9 of the way from 200 to 400 (rank 1.9 of 0..2): 380.
    assert latency["high p50"] == [None] * 58 + [200.0, None]
    assert latency["high p95"] == [None] * 58 + [380.0, None]
    assert latency["standard p50"] == latency["standard p95"] == [None] * 49 + [1500.0] + [None] * 10


def test_percentile_interpolates_like_postgresql():
    assert aggregates.percentile([100, 400, 200], 0.95) == 380
    assert aggregates.percentile([7], 0.5) == 7
    assert aggregates.percentile([], 0.5) is None


def test_failure_rate_is_failed_over_finished_attempts_per_provider(make):
    n = make()
    for result in ("sent", "transient", "permanent", "sent"):
        attempt(n, "twilio", at(12, 29, 1), result)
    attempt(n, "twilio", at(12, 29, 2))  # still in flight: not counted
    attempt(n, "vonage", at(12, 30, 1), "sent")

    rates = aggregates.failure_rate_per_provider(HOUR, NOW)

    assert rates == {"twilio": [None] * 58 + [0.5, None], "vonage": [None] * 59 + [0.0]}


def test_dead_letters_per_bucket_and_the_open_backlog(make):
    n = make()
    for created, replayed in ((at(12, 29, 1), None), (at(12, 29, 40), NOW), (at(11, 0), None)):
        letter = DeadLetter.objects.create(notification=n, provider="twilio", attempts=5, replayed_at=replayed)
        DeadLetter.objects.filter(pk=letter.pk).update(created_at=created)

    assert aggregates.dead_letters(HOUR, NOW) == {"twilio": [0] * 58 + [2, 0]}
    assert aggregates.open_dead_letters() == 2


def test_queue_depth_is_rebuilt_backwards_from_now_through_the_state_changes(make):
    a = make(priority="high", state=State.SENT)
    b = make(priority="high", state=State.QUEUED)
    make(priority="standard", state=State.SENT)
    StateChange.objects.all().delete()  # the API's own changes happened "now"; these tell the story instead
    for notification, from_state, to_state, when in (
        (a, "", State.QUEUED, at(12, 10, 5)),
        (a, State.QUEUED, State.SENDING, at(12, 20, 5)),
        (a, State.SENDING, State.SENT, at(12, 20, 6)),
        (b, "", State.QUEUED, at(12, 25, 5)),
    ):
        change = StateChange.objects.create(notification=notification, from_state=from_state, to_state=to_state)
        StateChange.objects.filter(pk=change.pk).update(at=when)

    depth = aggregates.queue_depth_per_tier(HOUR, NOW)

    # 11:31–12:09 empty; a queued 12:10–12:19; taken 12:20; b queued from 12:25 and still is.
    assert depth["high"] == [0] * 39 + [1] * 10 + [0] * 5 + [1] * 6
    assert depth["standard"] == [0] * 60
    assert aggregates.queued_now() == {"high": 1, "standard": 0}


def test_sms_cost_adds_each_kinds_priced_attempts_per_utc_day(make):
    otp = make(channel="sms")
    Notification.objects.filter(pk=otp.pk).update(kind=Kind.objects.get(name="otp"))
    shipped = make(channel="sms")
    email = make(channel="email")
    price = {"cost": Decimal("0.0450"), "currency": "USD"}
    attempt(otp, "twilio", at(12, 0), "sent", **price)
    attempt(otp, "twilio", at(12, 10), "transient", cost=actions.NOT_BILLED, currency="USD")  # as the engine writes it
    attempt(otp, "twilio", at(12, 20), "sent", **price)
    attempt(shipped, "twilio", at(20, 0, day=29), "sent", cost=Decimal("0.0900"), currency="USD")
    attempt(shipped, "twilio", at(12, 0, day=29), "sent", **price)  # before the day's first hour
    attempt(email, "smtp", at(12, 0), "sent")  # not SMS, not priced

    assert aggregates.sms_cost_per_kind_per_day(DAY, NOW) == {
        "2026-11-29": {"shipped USD": Decimal("0.0900")},
        "2026-11-30": {"otp USD": Decimal("0.0900")},
    }


def test_delivered_ratio_counts_the_delivered_state_among_those_sent_in_the_window(make):
    for state in ("delivered", "delivered", "delivered", State.SENT):
        make(provider="twilio", sent_at=at(12, 0), state=state)
    make(provider="vonage", sent_at=at(12, 0), state=State.SENT)
    make(provider="vonage", sent_at=at(12, 0), state="undelivered")
    make(provider="vonage", sent_at=at(11, 0, day=29), state="delivered")  # before the day

    assert aggregates.delivered_ratio_per_provider(DAY, NOW) == {
        "twilio": {"sent": 4, "delivered": 3, "ratio": 0.75},
        "vonage": {"sent": 2, "delivered": 0, "ratio": 0.0},
    }


def test_breaker_states_read_the_shared_breaker(settings):
    breaker.reset("twilio")
    breaker.reset("vonage")
    for _ in range(settings.NOTIFY["BREAKER_CONSECUTIVE_FAILURES"]):
        breaker.record("twilio", ok=False)
    # The embedded default's providers (no providers file here).
    assert aggregates.configured_providers() == ["fake-push", "fake-sms", "inapp", "smtp"]
    assert aggregates.breaker_states(["twilio", "vonage"]) == {"twilio": "open", "vonage": "closed"}


@pytest.mark.parametrize(
    "model, column, index",
    [
        (Notification, "sent_at", "notification_sent_brin"),
        (Attempt, "started_at", "attempt_started_brin"),
        (StateChange, "at", "statechange_at_brin"),
    ],
)
def test_a_windows_rows_are_found_through_its_brin_index(model, column, index):
    # A few test rows make a sequential scan cheapest; forbidding it shows the index can serve the window's filter.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
    plan = model.objects.filter(**{f"{column}__gte": at(11, 31), f"{column}__lte": NOW}).explain()
    assert f"Bitmap Index Scan on {index}" in plan
