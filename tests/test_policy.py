"""The policy checks of DESIGN.md §2 through the API, with real Redis counters and PostgreSQL rows."""

from datetime import UTC, datetime, time, timedelta

import pytest
import time_machine
from django.utils import timezone

from backend.notifications import policy
from backend.notifications.delivery import dispatch
from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Kind, Notification, Preference, Recipient, State, VelocityAlarm
from backend.notifications.queues import HUEYS

pytestmark = pytest.mark.usefixtures("demo_data")


def promo(send, n: int, **extra):
    return send({"user_id": "u-en-1", "kind": "promo", "params": {"percent": str(n)}, **extra}, key=f"promo-{n}")


def otp(send, n: int, user_id: str = "u-ar-1"):
    return send({"user_id": user_id, "kind": "otp", "params": {"code": f"{n:06d}"}}, key=f"login-{user_id}-{n}")


def states(responses) -> list[tuple[str, str]]:
    return [(r.json()["state"], r.json()["reason"]) for r in responses]


def test_marketing_over_the_hourly_limit_is_folded_into_one_digest(send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 3, "d": 10}}}
    responses = [promo(send, n) for n in range(20)]

    assert states(responses) == [("queued", "")] * 3 + [("suppressed", "digested")] * 17
    [digest] = Notification.objects.filter(kind__name="digest")
    assert (digest.state, digest.channel, digest.recipient.user_id) == (State.SCHEDULED, "email", "u-en-1")
    assert digest.params["count"] == 17
    assert digest.params["items"] == [f"{n}% off this weekend" for n in range(3, 20)]
    assert Notification.objects.filter(digest=digest).count() == 17
    # It goes out when the hour reopens, not before.
    assert timezone.now() + timedelta(minutes=59) < digest.send_at <= timezone.now() + timedelta(minutes=62)


def test_marketing_over_the_limit_is_suppressed_when_the_kind_says_so(send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 3, "d": 10}}}
    Kind.objects.filter(name="promo").update(over_limit="suppress")
    responses = [promo(send, n) for n in range(20)]
    assert states(responses) == [("queued", "")] * 3 + [("suppressed", "rate-limited")] * 17
    assert not Notification.objects.filter(kind__name="digest").exists()


def test_the_daily_limit_counts_too(send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 100, "d": 4}}}
    Kind.objects.filter(name="promo").update(over_limit="suppress")
    assert states([promo(send, n) for n in range(6)]) == [("queued", "")] * 4 + [("suppressed", "rate-limited")] * 2


def test_ten_otps_to_one_number_send_three(send):
    responses = [otp(send, n) for n in range(10)]
    assert states(responses) == [("queued", "")] * 3 + [("suppressed", "otp-limit")] * 7
    for response in responses[:3]:
        dispatch.deliver(response.json()["id"])
    assert Notification.objects.filter(kind__name="otp", state=State.SENT).count() == 3
    # Another number has its own allowance.
    Recipient.objects.filter(user_id="u-en-1").update(phone="+14155550100")
    assert otp(send, 1, user_id="u-en-1").json()["state"] == "queued"


def test_redis_counts_a_phones_otps_under_an_hmac_never_the_number(send):
    """The window outlives an erasure of the person by up to NOTIFY_OTP_WINDOW seconds: it must not name them."""
    otp(send, 1)
    phone = Recipient.objects.get(user_id="u-ar-1").phone
    keys = [key.decode() for key in HUEYS["high"].storage.conn.keys("otp:*")]
    assert keys == [policy.otp_window_key(phone)] and phone not in keys[0] and len(keys[0]) == len("otp:") + 32
    assert policy.otp_window_key(phone) != policy.otp_window_key("+14155550100")


def test_a_security_alert_at_3am_local_with_quiet_hours_on_goes_at_once(send):
    Recipient.objects.filter(user_id="u-ar-1").update(quiet_hours_start=time(22), quiet_hours_end=time(7))
    with time_machine.travel(datetime(2026, 12, 2, 0, 0, tzinfo=UTC)):  # 03:00 in Riyadh
        code = otp(send, 1)
        update = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "7"}}, key="order-7")
    assert (code.json()["state"], code.json()["priority"]) == ("queued", "high")
    # The standard update waits for 07:00 Riyadh = 04:00 UTC.
    assert states([update]) == [("scheduled", "quiet-hours")]
    assert update.json()["send_at"] == "2026-12-02T04:00:00Z"


def test_a_quiet_hours_deferral_is_sent_at_the_window_end_not_dropped(send):
    Recipient.objects.filter(user_id="u-ar-1").update(quiet_hours_start=time(22), quiet_hours_end=time(7))
    with time_machine.travel(datetime(2026, 12, 2, 0, 0, tzinfo=UTC)):
        pk = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "7"}}, key="order-7").json()["id"]
    with time_machine.travel(datetime(2026, 12, 2, 3, 59, tzinfo=UTC)):
        assert sweep().due_scheduled == 0
    with time_machine.travel(datetime(2026, 12, 2, 4, 0, 1, tzinfo=UTC)):
        assert sweep().due_scheduled == 1
    assert Notification.objects.get(pk=pk).state == State.QUEUED


def test_an_opted_out_channel_is_skipped_and_all_opted_out_is_suppressed(send):
    recipient = Recipient.objects.get(user_id="u-en-1")
    promo_kind = Kind.objects.get(name="promo")
    Preference.objects.create(recipient=recipient, kind=promo_kind, channel="email", enabled=False)
    routed = promo(send, 1).json()
    assert (routed["state"], routed["channel"]) == ("queued", "push")
    assert routed["state_history"][0]["reason"] == "fallback: email: opted-out"

    Preference.objects.create(recipient=recipient, kind=promo_kind, channel="push", enabled=False)
    assert states([promo(send, 2)]) == [("suppressed", "opted-out")]
    assert states([promo(send, 3, channel="email")]) == [("suppressed", "opted-out")]


def test_security_kinds_ignore_opt_outs(send):
    recipient = Recipient.objects.get(user_id="u-ar-1")
    Preference.objects.create(recipient=recipient, kind=Kind.objects.get(name="otp"), channel="sms", enabled=False)
    assert states([otp(send, 1)]) == [("queued", "")]


def test_every_stop_is_a_row_with_its_reason_visible_through_get(api, send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1}}}
    Kind.objects.filter(name="promo").update(over_limit="suppress")
    promo(send, 1)
    limited = promo(send, 2).json()
    body = api.get(f"/api/v1/notifications/{limited['id']}").json()
    assert (body["state"], body["reason"]) == ("suppressed", "rate-limited")
    assert [(c["to_state"], c["reason"]) for c in body["state_history"]] == [("suppressed", "rate-limited")]


def test_a_velocity_alarm_fires_once_per_country_and_minute(send, settings):
    settings.NOTIFY = {**settings.NOTIFY, "OTP_VELOCITY_PER_MINUTE": 2}
    for n, phone in enumerate(["+966501234501", "+966501234502", "+966501234503", "+966501234504"]):
        Recipient.objects.create(user_id=f"pump-{n}", phone=phone)
        otp(send, n, user_id=f"pump-{n}")
    [alarm] = VelocityAlarm.objects.all()
    assert (alarm.country, alarm.count, alarm.threshold) == ("SA", 3, 2)
