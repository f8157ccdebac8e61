"""The delivery engine against the stub providers over real HTTP, with real Redis and PostgreSQL.

Each test drives a worker's step (``dispatch.deliver``) by hand, so retries,
failover and expiry happen in an order the test controls; test_workers.py
does the same with real worker processes.
"""

import io
import time
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.core.management import call_command
from django.utils import timezone

from backend.notifications import actions, pricing
from backend.notifications.delivery import breaker, budget, dispatch, sent_marker
from backend.notifications.delivery.sweeper import sweep
from backend.notifications.models import Attempt, BreakerEvent, DeadLetter, Device, Kind, Notification, Recipient, State
from backend.notifications.providers.config import ProviderConfig
from backend.notifications.queues import HUEYS

pytestmark = pytest.mark.usefixtures("demo_data", "stub_providers")

LAYLA_PHONE = "+966501234567"


@pytest.fixture(autouse=True)
def many_otps_to_one_number(settings):
    """These tests send Layla more codes than the SMS-pumping limit allows (test_policy.py covers it)."""
    settings.NOTIFY = {**settings.NOTIFY, "OTP_LIMIT": 100}


def post(send_fn, kind: str, key: str, channel: str | None = None, **params) -> Notification:
    body = {"user_id": "u-ar-1", "kind": kind, "params": params or {"order": "5012"}}
    if channel:
        body["channel"] = channel
    response = send_fn(body, key=key)
    assert response.status_code == 202, response.json()
    return Notification.objects.get(pk=response.json()["id"])


def otp(send_fn, n: int) -> Notification:
    return post(send_fn, "otp", f"login-{n}", code=f"{100000 + n}")


def deliver(notification: Notification) -> Notification:
    dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    return notification


def results(notification: Notification) -> list[tuple[str, str]]:
    return list(notification.attempts.values_list("provider", "result"))


def stub_messages(stub, provider: str) -> list[dict]:
    return [m for m in stub.state.messages if m["provider"] == provider]


def test_a_transient_error_is_retried_with_growing_jittered_delays_then_sent(
    send, stub_providers, django_capture_on_commit_callbacks
):
    stub_providers.state.faults = {"twilio": {"rules": {LAYLA_PHONE: {"outcome": "500", "times": 3}}}}
    notification = post(send, "shipped", "order-1-shipped", channel="sms")

    for retry, ceiling in enumerate([4, 8, 16], start=1):  # uniform(0, min(300, 2·2^n)) with base 2 s
        before = timezone.now()
        with django_capture_on_commit_callbacks(execute=True):
            notification = deliver(notification)
        assert (notification.state, notification.reason) == (State.QUEUED, "retry")
        delay = (notification.queued_at - before).total_seconds()
        assert 0 <= delay <= ceiling + 0.5, f"retry {retry}: {delay:.2f}s"
        # The retry is a task with an ETA on the queue: no worker slept.
        task = HUEYS["standard"].pending()[-1]
        assert (task.args, task.eta is not None) == ((str(notification.pk),), True)

    notification = deliver(notification)
    assert notification.state == State.SENT
    assert results(notification) == [("twilio", "transient")] * 3 + [("twilio", "sent")]
    # "تم شحن طلبك رقم 5012." is 21 UTF-16 units of UCS-2: one segment, priced for Saudi Arabia.
    # Each try measured alike; only the one the provider took is billed.
    tries = list(notification.attempts.values_list("sms_encoding", "sms_segments", "currency", "cost"))
    price = pricing.segment_price("SA", "twilio").per_segment
    assert tries == [("UCS-2", 1, "USD", Decimal(0))] * 3 + [("UCS-2", 1, "USD", price)]
    assert [m["to"] for m in stub_messages(stub_providers, "twilio")] == [LAYLA_PHONE]


@pytest.mark.parametrize("stored", ["with the phone", "none", "for another phone"])
def test_an_sms_is_priced_for_the_country_stored_with_the_phone(send, monkeypatch, stored):
    """Without parsing the number again; parsed where no country is stored for that very phone."""
    layla = Recipient.objects.filter(phone=LAYLA_PHONE)
    if stored == "with the phone":
        monkeypatch.setattr(pricing, "country_for_number", lambda number: pytest.fail(f"{number} parsed again"))
    elif stored == "none":
        layla.update(phone_country="")
    else:  # the stored country is another phone's, here an American one's
        layla.update(phone_country="US", phone_country_of="+14155552671")
    notification = deliver(post(send, "shipped", "order-priced", channel="sms"))

    assert notification.state == State.SENT
    attempt = notification.attempts.get()
    assert (attempt.sms_segments, attempt.cost) == (1, pricing.segment_price("SA", "twilio").per_segment)


def test_a_permanent_error_is_not_retried_and_the_number_is_disabled(send, stub_providers):
    stub_providers.state.faults = {"twilio": {"rules": {LAYLA_PHONE: "invalid-number"}}}
    notification = deliver(post(send, "shipped", "order-2-shipped", channel="sms"))

    assert (notification.state, notification.reason) == (State.FAILED, "permanent-error")
    assert notification.last_error == f"twilio 21211: The 'To' number {LAYLA_PHONE} is not a valid phone number."
    assert results(notification) == [("twilio", "permanent")]
    recipient = Recipient.objects.get(user_id="u-ar-1")
    assert recipient.phone_disabled_at is not None
    # The next SMS to that number is suppressed before any provider is called.
    again = post(send, "shipped", "order-3-shipped", channel="sms")
    assert (again.state, again.reason) == (State.SUPPRESSED, "address-disabled")
    # New contact data makes the number usable again.
    recipient_data = {"email": recipient.email, "phone": "+966501234568", "language": "ar", "time_zone": "Asia/Riyadh"}
    actions.upsert_recipient("u-ar-1", recipient_data)
    assert Recipient.objects.get(user_id="u-ar-1").phone_disabled_at is None


def test_an_unregistered_push_token_is_disabled_and_other_devices_still_get_it(send, stub_providers):
    from tests.providers_setup import browser_subscription

    recipient = Recipient.objects.get(user_id="u-ar-1")
    recipient.devices.all().delete()  # the demo's phone
    dead = Device.objects.create(recipient=recipient, platform="fcm", token="fcm-token-dead")
    subscription = browser_subscription(stub_providers.url, "browser-1")
    Device.objects.create(
        recipient=recipient, platform="webpush", token=subscription["endpoint"], subscription=subscription
    )
    stub_providers.state.faults = {"fcm": {"rules": {"fcm-token-dead": "unregistered"}}}

    notification = deliver(post(send, "shipped", "order-4-shipped", channel="push"))

    assert notification.state == State.SENT
    assert sorted(results(notification)) == [("fcm", "permanent"), ("webpush", "sent")]
    dead.refresh_from_db()
    assert dead.disabled_at is not None
    assert dead.disabled_reason == "fcm 404 UNREGISTERED: Requested entity was not found."
    assert [m["to"] for m in stub_messages(stub_providers, "webpush")] == [subscription["endpoint"]]


def two_fcm_devices() -> None:
    """Layla's devices: an FCM phone and an FCM tablet, in place of the demo's one phone."""
    recipient = Recipient.objects.get(user_id="u-ar-1")
    recipient.devices.all().delete()
    Device.objects.bulk_create([Device(recipient=recipient, platform="fcm", token=token)
                                for token in ("fcm-phone", "fcm-tablet")])  # fmt: skip


def test_a_device_not_reached_for_now_gets_the_push_on_the_retry_and_the_others_only_once(send, stub_providers):
    two_fcm_devices()
    stub_providers.state.faults = {"fcm": {"rules": {"fcm-tablet": {"outcome": "503", "times": 1}}}}

    notification = deliver(post(send, "shipped", "order-41-shipped", channel="push"))
    assert (notification.state, notification.reason) == (State.QUEUED, "retry")  # not "sent" with one left out
    assert notification.last_error.startswith("other devices: ")
    notification = deliver(notification)  # the worker's retry

    assert notification.state == State.SENT
    assert sorted(notification.attempts.values_list("device__token", "result")) == [
        ("fcm-phone", "sent"), ("fcm-tablet", "sent"), ("fcm-tablet", "transient"),
    ]  # fmt: skip
    assert sorted(m["to"] for m in stub_messages(stub_providers, "fcm")) == ["fcm-phone", "fcm-tablet"]


@pytest.mark.parametrize(
    ("fault", "limits", "tablet"),
    [
        pytest.param("unregistered", {}, "permanent", id="the-other-device-is-gone"),
        pytest.param({"outcome": "503", "times": 1}, {"MAX_ATTEMPTS": 1}, "transient", id="no-tries-left"),
    ],
)
def test_a_push_some_devices_took_ends_sent_when_the_rest_cannot_be_retried(send, stub_providers, settings, fault,
                                                                            limits, tablet):  # fmt: skip
    settings.NOTIFY = {**settings.NOTIFY, **limits}
    two_fcm_devices()
    stub_providers.state.faults = {"fcm": {"rules": {"fcm-tablet": fault}}}

    notification = deliver(post(send, "shipped", "order-42-shipped", channel="push"))

    assert notification.state == State.SENT  # never failed or dead-lettered: the phone has it
    assert sorted(notification.attempts.values_list("device__token", "result")) == [
        ("fcm-phone", "sent"), ("fcm-tablet", tablet),
    ]  # fmt: skip


def test_a_push_to_six_devices_in_an_outage_is_retried_per_try_not_dead_lettered_per_call(
    send, stub_providers, settings
):
    # Six devices make six attempts a try: counted per call, MAX_ATTEMPTS (3 here) ended it after the first.
    # The breaker kept closed: an open one makes the calls wait instead of fail.
    settings.NOTIFY = {**settings.NOTIFY, "MAX_ATTEMPTS": 3, "BREAKER_CONSECUTIVE_FAILURES": 1000,
                       "BREAKER_FAILURE_RATE": 2.0}  # fmt: skip
    recipient = Recipient.objects.get(user_id="u-ar-1")
    recipient.devices.all().delete()
    Device.objects.bulk_create([Device(recipient=recipient, platform="fcm", token=f"fcm-{n}") for n in range(6)])
    outage = [time.time(), time.time() + 3600]
    stub_providers.state.faults = {"fcm": {"outage": outage}}
    notification = post(send, "shipped", "order-43-shipped", channel="push")

    tries = []
    for _ in range(3):
        notification = deliver(notification)
        tries.append((notification.state, dispatch.tries_used(notification), notification.attempt_count))

    assert tries == [(State.QUEUED, 1, 6), (State.QUEUED, 2, 12), (State.FAILED, 3, 18)]
    assert DeadLetter.objects.filter(notification=notification).count() == 1
    stub_providers.state.faults = {}
    assert actions.replay(DeadLetter.objects.get(notification=notification), by="support") == "replayed"
    notification = deliver(notification)
    assert (notification.state, dispatch.tries_used(notification)) == (State.SENT, 1)  # counted from the replay


def test_a_dead_letter_after_the_last_attempt_and_its_replay_delivering(send, stub_providers, settings):
    settings.NOTIFY = {**settings.NOTIFY, "MAX_ATTEMPTS": 2}
    stub_providers.state.faults = {"twilio": {"rules": {LAYLA_PHONE: {"outcome": "429", "times": 2}}}}
    notification = deliver(deliver(post(send, "shipped", "order-5-shipped", channel="sms")))

    assert (notification.state, notification.reason) == (State.FAILED, "attempts-exhausted")
    [letter] = DeadLetter.objects.all()
    assert (letter.notification_id, letter.provider, letter.attempts) == (notification.pk, "twilio", 2)
    assert (
        letter.last_error
        == "twilio answered HTTP 429: " + '{"code": 20429, "message": "Too Many Requests", "status": 429}'
    )

    out = io.StringIO()
    call_command("replay_dead_letters", "--kind", "shipped", stdout=out)
    assert out.getvalue().splitlines()[-1] == "1 replayed"
    notification = deliver(notification)
    assert notification.state == State.SENT
    assert [r for _, r in results(notification)] == ["transient", "transient", "sent"]
    letter.refresh_from_db()
    assert letter.replayed_by == "manage.py replay_dead_letters"


def test_a_replay_past_validity_expires_instead_of_sending(send, stub_providers, settings):
    settings.NOTIFY = {**settings.NOTIFY, "MAX_ATTEMPTS": 1}
    stub_providers.state.faults = {
        "twilio": {"error": "500", "error_rate": 1.0},
        "vonage": {"error": "500", "error_rate": 1.0},
    }
    notification = deliver(otp(send, 1))
    assert notification.reason == "attempts-exhausted"

    stub_providers.state.faults = {}
    with time_machine.travel(timezone.now() + timedelta(minutes=6)):
        assert actions.replay(DeadLetter.objects.get(), by="support") == "expired"
    notification.refresh_from_db()
    assert (notification.state, notification.reason) == (State.EXPIRED, "validity-expired")
    assert stub_providers.state.messages == []


def test_the_breaker_opens_otps_go_out_through_the_backup_then_a_probe_closes_it(send, stub_providers, settings):
    settings.NOTIFY = {**settings.NOTIFY, "BREAKER_CONSECUTIVE_FAILURES": 3, "BREAKER_COOLDOWN": 1.0}
    stub_providers.state.faults = {"twilio": {"outage": [time.time(), time.time() + 1.0], "error": "500"}}

    sent = [deliver(otp(send, n)) for n in range(5)]

    assert [(n.state, n.provider) for n in sent] == [(State.SENT, "vonage")] * 5
    # The first three tried Twilio and failed over; once open, the breaker sends OTPs straight to the backup.
    assert [results(n) for n in sent[:3]] == [[("twilio", "transient"), ("vonage", "sent")]] * 3
    assert [results(n) for n in sent[3:]] == [[("vonage", "sent")]] * 2
    assert breaker.state("twilio") == "open"

    time.sleep(1.1)  # the cool-down, and the outage, are over
    probe = deliver(otp(send, 9))
    assert (probe.state, probe.provider) == (State.SENT, "twilio")
    assert breaker.state("twilio") == "closed"
    events = list(BreakerEvent.objects.order_by("at", "id").values_list("provider", "from_state", "to_state", "reason"))
    assert events == [
        ("twilio", "closed", "open", "3 consecutive failures, 3/3 failed in the window"),
        ("twilio", "open", "half-open", "cool-down over: one probe call"),
        ("twilio", "half-open", "closed", "probe succeeded"),
    ]


def test_standard_sms_waits_while_the_breaker_is_open(send, stub_providers, settings):
    settings.NOTIFY = {**settings.NOTIFY, "BREAKER_CONSECUTIVE_FAILURES": 1, "BREAKER_COOLDOWN": 60.0}
    breaker.record("twilio", ok=False)
    notification = deliver(post(send, "shipped", "order-6-shipped", channel="sms"))

    assert (notification.state, notification.attempt_count) == (State.QUEUED, 0)
    assert [t.args for t in HUEYS["standard"].pending() if t.eta] == [(str(notification.pk),)]
    assert stub_providers.state.messages == []


def test_standard_traffic_never_spends_the_high_tiers_reserved_share():
    config = ProviderConfig(name="p", type="twilio", rate=10, burst=10, high_share=0.3)
    standard = [budget.take_token(config, "standard") for _ in range(8)]
    assert standard[:7] == [0.0] * 7  # its 70 %: 7 of the 10-message burst
    assert 0 < standard[7] <= 1 / 7 + 0.01  # then it waits for its own refill (7 tokens/s)
    high = [budget.take_token(config, "high") for _ in range(4)]
    assert high[:3] == [0.0] * 3  # the reserved 30 % is still there for OTPs
    assert high[3] > 0


def test_high_traffic_may_borrow_the_standard_share_but_not_the_reverse():
    config = ProviderConfig(name="q", type="twilio", rate=10, burst=10, high_share=0.3)
    assert [budget.take_token(config, "high") for _ in range(10)] == [0.0] * 10
    assert budget.take_token(config, "standard") > 0


def test_a_standard_send_over_budget_is_rescheduled_without_an_attempt(send, stub_providers, tmp_path, settings):
    from tests.providers_setup import write_providers_file

    path = write_providers_file(tmp_path / "budget.toml", stub_providers.url, twilio={"rate": 0.5, "burst": 2,
                                                                                     "high_share": 0.5})  # fmt: skip
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    first = deliver(post(send, "shipped", "order-7-shipped", channel="sms"))
    second = deliver(post(send, "shipped", "order-8-shipped", channel="sms"))
    code = deliver(otp(send, 1))

    assert first.state == State.SENT
    assert (second.state, second.attempt_count) == (State.QUEUED, 0)
    assert (code.state, code.provider) == (State.SENT, "twilio")


def test_a_crash_after_the_provider_accepted_sends_no_duplicate(send, stub_providers, settings, monkeypatch):
    notification = otp(send, 1)

    class Killed(BaseException):
        pass

    def die_before_the_status_write(attempt, result, *args, **kwargs):
        if result == Attempt.Result.SENT:
            raise Killed
        return original(attempt, result, *args, **kwargs)

    original = actions.finish_attempt
    monkeypatch.setattr(actions, "finish_attempt", die_before_the_status_write)
    with pytest.raises(Killed):
        dispatch.deliver(str(notification.pk))
    monkeypatch.setattr(actions, "finish_attempt", original)
    notification.refresh_from_db()
    assert notification.state == State.SENDING
    assert sent_marker.get(str(notification.pk))[0] == "twilio"

    with time_machine.travel(timezone.now() + timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"] + 1)):
        assert sweep().stale_sending == 1
    notification = deliver(notification)
    assert (notification.state, notification.reason, notification.provider) == (State.SENT, "sent-marker", "twilio")
    assert len(stub_messages(stub_providers, "twilio")) == 1


def test_a_backup_acceptance_lost_with_redis_is_recovered_from_the_attempt_row_without_a_second_call(
    send, stub_providers, settings, monkeypatch
):
    """Twilio fails, Vonage accepts, the worker dies before the status write and Redis restarts empty.

    The sent-marker is gone with Redis; the attempt row in PostgreSQL still says Vonage accepted it, so
    recovery records it sent and calls no provider again (neither Vonage nor a Twilio that is back).
    """
    stub_providers.state.faults = {"twilio": {"rules": {LAYLA_PHONE: {"outcome": "500", "times": 1}}}}
    notification = otp(send, 1)

    class Killed(BaseException):
        pass

    def die(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(actions, "mark_sent", die)
    with pytest.raises(Killed):
        dispatch.deliver(str(notification.pk))
    monkeypatch.undo()
    HUEYS["high"].storage.conn.flushall()  # Redis restarted empty: the sent-marker is lost
    assert sent_marker.get(str(notification.pk)) is None
    reference = stub_messages(stub_providers, "vonage")[0]["ref"]

    with time_machine.travel(timezone.now() + timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"] + 1)):
        assert sweep().stale_sending == 1
    notification = deliver(notification)

    assert (notification.state, notification.reason) == (State.SENT, "recovered")
    assert (notification.provider, notification.provider_ref) == ("vonage", reference)
    assert results(notification) == [("twilio", "transient"), ("vonage", "sent")]
    assert [m["provider"] for m in stub_providers.state.messages] == ["vonage"]


def test_a_push_every_device_accepted_before_the_worker_died_is_recovered_as_sent_not_failed(
    send, stub_providers, settings, monkeypatch
):
    notification = post(send, "shipped", "order-9-shipped", channel="push")  # the demo phone's one FCM token

    class Killed(BaseException):
        pass

    def die(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(actions, "mark_sent", die)
    with pytest.raises(Killed):
        dispatch.deliver(str(notification.pk))
    monkeypatch.undo()
    with time_machine.travel(timezone.now() + timedelta(seconds=settings.NOTIFY["VISIBILITY_TIMEOUT"] + 1)):
        assert sweep().stale_sending == 1
    notification = deliver(notification)

    assert (notification.state, notification.reason, notification.provider) == (State.SENT, "sent-marker", "fcm")
    assert len(stub_messages(stub_providers, "fcm")) == 1


def test_an_otp_whose_validity_ran_out_during_an_outage_expires_and_is_never_sent_late(send, stub_providers):
    Kind.objects.filter(name="otp").update(validity_seconds=60)
    outage = [time.time(), time.time() + 3600]
    stub_providers.state.faults = {"twilio": {"outage": outage}, "vonage": {"outage": outage}}
    notification = deliver(otp(send, 1))
    assert (notification.state, notification.reason) == (State.QUEUED, "retry")

    stub_providers.state.faults = {}  # the providers are back, but too late
    with time_machine.travel(timezone.now() + timedelta(seconds=61)):
        notification = deliver(notification)
    assert (notification.state, notification.reason) == (State.EXPIRED, "validity-expired")
    assert results(notification) == [("twilio", "transient"), ("vonage", "transient")]
    assert stub_providers.state.messages == []
