"""The decision trail in plain words (backend/support/trail.py) for each policy stop, time frozen."""

from datetime import UTC, datetime, time

import pytest
import time_machine

from backend.notifications import actions
from backend.notifications.models import Kind, Recipient, StateChange
from backend.support import trail
from tests.support_setup import send

EVENING = datetime(2026, 11, 12, 20, 30, tzinfo=UTC)  # 23:30 in Riyadh


def texts(notification) -> list[str]:
    return [step.text for step in trail.trail(notification)]


def test_quiet_hours_say_the_window_the_local_arrival_and_when_it_goes_out(demo_data):
    actions.set_quiet_hours(Recipient.objects.get(user_id="u-ar-1"), time(22, 0), time(7, 0))
    with time_machine.travel(EVENING, tick=False):
        held = send("order-1-shipped", "u-ar-1", "shipped", {"order": "1"}, channel="sms")

    assert texts(held)[1] == (
        "Held for quiet hours: the user's quiet hours are 22:00–07:00 in Asia/Riyadh; it arrived at "
        "12 Nov 2026 at 23:30 (Asia/Riyadh) on their clock and goes out on 13 Nov 2026 at 07:00 (Asia/Riyadh) "
        "(13 Nov 04:00 UTC)."
    )
    assert trail.trail(held)[1].local == "12 Nov 2026 at 23:30 (Asia/Riyadh)"


@pytest.mark.parametrize(
    ("by", "said"),
    [
        (actions.BY_PREFERENCE_CENTER, ", set by the user, in the preference center"),
        (actions.BY_ONE_CLICK, ", set by the user's mail client, by one-click unsubscribe (RFC 8058)"),
        ("API client shop-backend", ", set by API client shop-backend"),  # a service, not the person
        ("", ""),  # a change made before who made it was recorded
    ],
)
def test_an_opt_out_says_since_when_and_who_turned_it_off(demo_data, by, said):
    layla = Recipient.objects.get(user_id="u-ar-1")
    with time_machine.travel(datetime(2026, 11, 12, 11, 2, tzinfo=UTC), tick=False):
        actions.set_preference(layla, Kind.objects.get(name="promo"), "email", False, by=by)
    with time_machine.travel(EVENING, tick=False):
        stopped = send("promo-1", "u-ar-1", "promo", {"percent": "20"}, channel="email")

    assert texts(stopped)[1] == (
        f"Not sent: promo on email is off in the user's preferences since 12 Nov 2026 at 14:02 (Asia/Riyadh){said}."
    )


def test_a_rate_limit_says_which_window_was_full_and_the_digest_when_it_goes_out(demo_data, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1, "d": 10}}}
    with time_machine.travel(EVENING, tick=False):
        send("promo-1", "u-en-1", "promo", {"percent": "20"}, channel="email")
        folded = send("promo-2", "u-en-1", "promo", {"percent": "30"}, channel="email")
    folded.refresh_from_db()

    assert folded.reason == "digested"
    assert texts(folded)[1] == (
        "Not sent: the user had reached the limit for marketing messages, so it was put into a digest "
        f"(1 per hour; 1 in the hour before this one). The digest {folded.digest_id} goes out on "
        "12 Nov 2026 at 16:31 (America/New_York)."
    )


@pytest.mark.parametrize(
    "state, words",
    [("delivered", "Delivered (twilio: 0)."), ("undelivered", "Undelivered (twilio: 30003).")],
)
def test_a_state_it_has_no_words_for_is_told_by_its_name_and_reason(demo_data, state, words):
    notification = send("order-2-shipped", "u-ar-1", "shipped", {"order": "2"}, channel="sms")
    code = "0" if state == "delivered" else "30003"
    StateChange.objects.create(notification=notification, from_state="sent", to_state=state, reason=f"twilio: {code}")

    assert texts(notification)[-1] == words


@pytest.mark.parametrize(
    "reason, words",
    [
        ("send-at", "Scheduled by the caller: it goes out on 13 Nov 2026 at 09:00 (Asia/Riyadh)."),
        (
            "campaign-wave",
            "Scheduled for its campaign's wave, at the chosen wall time on the user's clock: it goes out on "
            "13 Nov 2026 at 09:00 (Asia/Riyadh).",
        ),
        (
            "campaign-spread",
            "Spread over its campaign's sending window: it goes out on 13 Nov 2026 at 09:00 (Asia/Riyadh).",
        ),
        (
            "sending-hours",
            "Outside its campaign's sending hours on the user's clock; it waits for them to open: it goes out on "
            "13 Nov 2026 at 09:00 (Asia/Riyadh).",
        ),
    ],
)
def test_a_scheduled_row_says_who_held_it_and_when_it_goes_out(demo_data, reason, words):
    with time_machine.travel(EVENING, tick=False):
        row = send(f"held-{reason}", "u-ar-1", "shipped", {"order": "3"}, channel="sms")
    morning = datetime(2026, 11, 13, 6, 0, tzinfo=UTC)  # 09:00 in Riyadh
    type(row).objects.filter(pk=row.pk).update(state="scheduled", reason=reason, send_at=morning)
    StateChange.objects.filter(notification=row).update(to_state="scheduled", reason=reason)
    row.refresh_from_db()

    assert texts(row)[1] == words
