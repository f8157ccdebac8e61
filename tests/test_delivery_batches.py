"""Delivery in batches (delivery/batch.py) against the stub providers over real HTTP, real Redis and PostgreSQL.

Each guarantee of the single delivery, now with batches: each notification claimed and sent once
however many workers race on the same ids, an opening breaker stopping the rest of its batch, the
high tier's reserved budget and bulkhead share untouched by standard batches, and what a batch
cannot send now re-scheduled without an attempt. Killed batch workers: test_batch_processes.py.
"""

import itertools
import math
import random
import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications import masking, pricing
from backend.notifications.delivery import batch, breaker, budget, dispatch, sent_marker, sweeper
from backend.notifications.delivery.shared_state import redis_client
from backend.notifications.models import (
    Attempt,
    Kind,
    Notification,
    Recipient,
    State,
    StateChange,
    TemplateVersion,
)
from backend.notifications.providers.config import ProviderConfig
from backend.notifications.queues import HUEYS
from backend.stubs import provider_server
from campaigns import actions as campaign_actions
from campaigns.models import Campaign
from tests.campaigns_setup import list_segment, submitted
from tests.plans_setup import analyze, copies_in_sql, copies_of, plan_of
from tests.providers_setup import write_providers_file

pytestmark = pytest.mark.usefixtures("demo_data", "stub_providers")


@pytest.fixture(autouse=True)
def many_otps_to_one_number(settings):
    settings.NOTIFY = {**settings.NOTIFY, "OTP_LIMIT": 100}


def queued_sms(send, count: int, user_id: str = "u-ar-1") -> list[str]:
    """``count`` queued standard SMS to ``user_id`` (orders 0 … count−1): one accepted, the rest its copies.

    Copied rather than each accepted: the user's rate limit would fold most of them into a digest.
    """
    body = {"user_id": user_id, "kind": "shipped", "params": {"order": "0"}, "channel": "sms"}
    response = send(body, key="k-0")
    assert response.status_code == 202, response.json()
    first = Notification.objects.get(pk=response.json()["id"])
    copies = []
    for n in range(1, count):
        copy = Notification.objects.get(pk=first.pk)
        copy.pk, copy.idempotency_key, copy.params = uuid.uuid4(), f"k-{n}", {"order": str(n)}
        copies.append(copy)
    Notification.objects.bulk_create(copies)
    return [str(first.pk)] + [str(copy.pk) for copy in copies]


def states(ids) -> dict[str, int]:
    found: dict[str, int] = {}
    for state in Notification.objects.filter(pk__in=ids).values_list("state", flat=True):
        found[state] = found.get(state, 0) + 1
    return found


def budgeted(tmp_path, stub, settings, **twilio) -> None:
    path = write_providers_file(tmp_path / "budget.toml", stub.url, twilio=twilio)
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}


def test_a_batch_is_sent_once_each_with_its_attempt_history_and_marker(send, stub_providers, caller):
    ids = queued_sms(send, 30)

    batch.deliver_batch(ids, "standard", caller)

    assert states(ids) == {State.SENT: 30}
    texts = sorted(m["text"] for m in stub_providers.state.messages)
    assert len(texts) == len(set(texts)) == 30
    notification = Notification.objects.get(pk=ids[0])
    assert (notification.provider, notification.attempt_count) == ("twilio", 1)
    assert notification.provider_ref.startswith("SM")
    history = list(notification.state_changes.values_list("from_state", "to_state", "reason"))
    assert history == [("", "queued", ""), ("queued", "sending", ""), ("sending", "sent", "")]
    attempt = notification.attempts.get()
    assert (attempt.result, attempt.provider_ref, attempt.sms_segments) == ("sent", notification.provider_ref, 1)
    assert sent_marker.get(ids[0]) == ("twilio", notification.provider_ref)


def test_a_wave_records_each_row_its_own_values(send, stub_providers, caller):
    # Per-row values of each type the recording statement carries: the provider's reference (notification and
    # attempt), the result, the latency, the error, and the params masked at rest (a JSON column).
    ids = queued_sms(send, 6)
    otp = Kind.objects.get(name="otp")
    version = TemplateVersion.objects.get(kind=otp, language="ar", channel="sms", status="approved")
    Notification.objects.filter(pk__in=ids[:2]).update(kind=otp, template_version=version, params={"code": "493817"})
    busy = Recipient.objects.get(user_id="u-en-1")
    Notification.objects.filter(pk__in=ids[4:]).update(recipient=busy)
    stub_providers.state.faults = {"twilio": {"rules": {busy.phone: "429"}}}

    batch.deliver_batch(ids, "standard", caller)

    rows = {str(row.pk): row for row in Notification.objects.filter(pk__in=ids)}
    attempts = {str(attempt.notification_id): attempt for attempt in Attempt.objects.filter(notification__in=ids)}
    kept = {m["ref"]: m["text"] for m in stub_providers.state.messages}
    assert [rows[pk].state for pk in ids] == [State.SENT] * 4 + [State.QUEUED] * 2  # the 429s wait for their retry
    for pk in ids[:4]:
        assert rows[pk].provider_ref in kept
        assert (attempts[pk].result, attempts[pk].provider_ref) == ("sent", rows[pk].provider_ref)
        assert attempts[pk].error == ""
    assert len({rows[pk].provider_ref for pk in ids[:4]}) == 4
    assert [kept[rows[pk].provider_ref] for pk in ids[:2]] == [
        "رمز التحقق الخاص بك هو 493817. تنتهي صلاحيته خلال 5 دقائق."
    ] * 2
    assert [rows[pk].params for pk in ids] == [{"code": masking.MASK}] * 2 + [{"order": str(n)} for n in range(2, 6)]
    for pk in ids[4:]:
        assert (attempts[pk].result, attempts[pk].provider_ref) == ("transient", "")
        assert attempts[pk].error.startswith("twilio answered HTTP 429: ")
    # What each attempt cost: the sent ones their quote (twilio to Saudi Arabia); a refused call nothing, its
    # segments and currency kept.
    assert [attempts[pk].cost for pk in ids[:4]] == [Decimal("0.0450")] * 4
    assert [(attempts[pk].sms_segments, attempts[pk].cost, attempts[pk].currency) for pk in ids[4:]] == [
        (1, Decimal(0), "USD")
    ] * 2
    assert all(attempt.latency_ms is not None and attempt.latency_ms >= 0 for attempt in attempts.values())


@pytest.mark.parametrize("stored", ["with the phone", "none", "for another phone"])
def test_each_sms_of_a_batch_is_priced_for_its_recipients_country(send, caller, monkeypatch, stored):
    """By the country stored with the phone; the number parsed where none is stored for that very phone."""
    ids = queued_sms(send, 4)
    american = Recipient.objects.create(user_id="us-1", phone="+14155552670", language="en")
    Notification.objects.filter(pk__in=ids[2:]).update(recipient=american)
    if stored == "with the phone":
        monkeypatch.setattr(pricing, "country_for_number", lambda number: pytest.fail(f"{number} parsed again"))
    elif stored == "none":
        Recipient.objects.filter(user_id__in=["u-ar-1", "us-1"]).update(phone_country="")
    else:  # a phone changed without its country: what is stored is another phone's, here a Saudi one's
        Recipient.objects.filter(user_id="us-1").update(phone="+14155552671", phone_country="SA")

    batch.deliver_batch(ids, "standard", caller)

    attempts = {str(a.notification_id): a for a in Attempt.objects.filter(notification__in=ids)}
    # The shipped price list: twilio 0.0450 a segment to Saudi Arabia, 0.0079 to the United States.
    assert [(attempts[pk].sms_segments, attempts[pk].cost) for pk in ids] == [(1, Decimal("0.0450"))] * 2 + [
        (1, Decimal("0.0079"))
    ] * 2


def test_a_batch_costs_a_fixed_number_of_queries_not_a_few_per_notification(
    send, caller, django_assert_max_num_queries, tmp_path, stub_providers, settings
):
    budgeted(tmp_path, stub_providers, settings, timeout=10.0)  # a busy machine's stub must not time out here
    ids = queued_sms(send, 40)
    # The rows, their kinds, their template versions; one wave: the claim with its history and attempt rows, then
    # the attempts' results with the move to sent and its history. Not 8 per row.
    with django_assert_max_num_queries(5):
        batch.deliver_batch(ids, "standard", caller)
    assert states(ids) == {State.SENT: 40}


@pytest.mark.parametrize(("user_id", "channel"), [("u-en-1", "push"), ("u-ar-1", "email")])
def test_a_push_or_email_batch_costs_a_fixed_number_of_queries_too(
    send, caller, smtp_sink, django_assert_max_num_queries, user_id, channel
):
    """The batch reads only some of the recipient's columns: none of the rest is fetched row by row after."""
    body = {"user_id": user_id, "kind": "shipped", "params": {"order": "0"}, "channel": channel}
    first = Notification.objects.get(pk=send(body, key="k-0").json()["id"])
    copies = [
        Notification(**{**{f.attname: getattr(first, f.attname) for f in Notification._meta.concrete_fields},
                        "id": uuid.uuid4(), "idempotency_key": f"k-{n}", "params": {"order": str(n)}})
        for n in range(1, 30)
    ]  # fmt: skip
    Notification.objects.bulk_create(copies)
    ids = [str(first.pk)] + [str(copy.pk) for copy in copies]

    # The rows, kinds, versions (push: the devices too); the claim; the results with the move to sent.
    with django_assert_max_num_queries(6):
        batch.deliver_batch(ids, "standard", caller)
    assert states(ids) == {State.SENT: 30}


def deliver_racing(ids: list[str], workers: int, shuffled: bool = False) -> list[str]:
    """``workers`` threads each delivering the batch ``ids`` (each in its own order when ``shuffled``); their errors."""
    errors = []

    def worker(seed: int) -> None:
        caller = batch.Caller()
        mine = list(ids)
        if shuffled:
            random.Random(seed).shuffle(mine)
        try:
            batch.deliver_batch(mine, "standard", caller)
        except Exception as exc:  # pragma: no cover - shown by the caller's assertion
            errors.append(repr(exc))
        finally:
            caller.close()
            connection.close()

    racers = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=120)
    return errors


@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_on_the_same_batch_deliver_each_notification_once(send, stub_providers):
    stub_providers.state.faults = {"twilio": {"latency_ms": 50}}
    ids = queued_sms(send, 60)

    assert deliver_racing(ids, 2) == []

    assert states(ids) == {State.SENT: 60}
    texts = [m["text"] for m in stub_providers.state.messages]
    assert len(texts) == len(set(texts)) == 60
    assert Attempt.objects.filter(notification__in=ids).count() == 60
    claims = Notification.objects.filter(pk__in=ids, state_changes__to_state=State.SENDING).count()
    assert claims == 60


def test_a_breaker_opening_in_the_middle_of_a_batch_stops_the_rest_of_it(
    send, stub_providers, settings, caller, monkeypatch, django_capture_on_commit_callbacks
):
    settings.NOTIFY = {**settings.NOTIFY, "BREAKER_CONSECUTIVE_FAILURES": 3, "BREAKER_COOLDOWN": 60.0}
    monkeypatch.setattr(batch, "WAVE", 5)
    stub_providers.state.faults = {"twilio": {"error_rate": 1.0, "error": "500"}}
    ids = queued_sms(send, 20)

    with django_capture_on_commit_callbacks(execute=True):
        batch.deliver_batch(ids, "standard", caller)

    assert breaker.state("twilio") == "open"
    assert stub_providers.state.calls == {"twilio": 5}  # the first wave only
    rows = Notification.objects.filter(pk__in=ids)
    assert sorted(rows.values_list("attempt_count", flat=True)) == [0] * 15 + [1] * 5
    assert states(ids) == {State.QUEUED: 20}  # the failed five wait for their retry, the rest for the breaker
    # A wave claims its rows once it has its slots: the waves the breaker stopped were never claimed and are untouched.
    stopped = rows.filter(attempt_count=0)
    assert set(stopped.values_list("last_error", flat=True)) == {""}
    assert not StateChange.objects.filter(notification__in=stopped, to_state=State.SENDING).exists()
    waiting = [t for t in HUEYS["standard"].pending() if t.eta] + HUEYS["standard"].scheduled()
    assert sorted(t.args[0] for t in waiting) == sorted(map(str, ids))


def test_an_open_breaker_sends_nothing_of_a_batch_and_touches_no_row(send, stub_providers, settings, caller):
    settings.NOTIFY = {**settings.NOTIFY, "BREAKER_CONSECUTIVE_FAILURES": 1, "BREAKER_COOLDOWN": 60.0}
    breaker.record("twilio", ok=False)
    ids = queued_sms(send, 10)

    batch.deliver_batch(ids, "standard", caller)

    assert stub_providers.state.messages == []
    assert states(ids) == {State.QUEUED: 10}
    assert Attempt.objects.count() == 0
    assert HUEYS["standard"].scheduled_count() == 10


def test_a_standard_batch_never_takes_the_high_tiers_reserved_tokens():
    config = ProviderConfig(name="r", type="twilio", rate=10, burst=10, high_share=0.3)
    granted, wait = budget.take_tokens(config, "standard", 10)
    assert granted == 7  # its 70 % of the 10-message burst, however many the batch asks for
    assert 0 < wait <= 1 / 7 + 0.01
    assert budget.take_tokens(config, "standard", 5)[0] == 0
    assert budget.take_tokens(config, "high", 3) == (3, 0.0)  # the reserved 30 % is still there for OTPs


def test_a_batch_over_budget_sends_its_share_and_reschedules_the_rest_without_an_attempt(
    send, stub_providers, tmp_path, settings, caller
):
    budgeted(tmp_path, stub_providers, settings, rate=1, burst=6, high_share=0.5)
    ids = queued_sms(send, 10)

    batch.deliver_batch(ids, "standard", caller)

    assert states(ids) == {State.SENT: 3, State.QUEUED: 7}
    assert Attempt.objects.count() == 3
    scheduled = sorted(HUEYS["standard"].scheduled(), key=lambda task: task.eta)
    assert len(scheduled) == 7
    # Spread one per token of the standard bucket's refill (0.5/s), not all at once.
    gaps = [(b.eta - a.eta).total_seconds() for a, b in itertools.pairwise(scheduled)]
    assert all(1.9 <= gap <= 2.1 for gap in gaps), gaps
    otp = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}, key="login-1").json()["id"]
    dispatch.deliver(otp)
    assert Notification.objects.get(pk=otp).state == State.SENT  # the reserve was left whole


def test_a_standard_batch_leaves_the_high_tier_its_bulkhead_slots(tmp_path, stub_providers, settings):
    config = ProviderConfig(name="s", type="twilio", concurrency=4, high_share=0.5)
    standard = budget.acquire_slots(config, 10, "standard")
    assert len(standard) == 2
    assert budget.acquire_slots(config, 1, "standard") == []
    high = [budget.acquire_slot(config, "high") for _ in range(3)]
    assert [slot is not None for slot in high] == [True, True, False]


@pytest.mark.django_db(transaction=True)
def test_the_high_tier_never_waits_behind_a_standard_batch_in_flight(
    send, stub_providers, tmp_path, settings, monkeypatch
):
    budgeted(tmp_path, stub_providers, settings, concurrency=2, high_share=0.5, rate=100, burst=100)
    # Sam's SMS hang past the client's 2 s timeout: the batch holds its bulkhead share all that time.
    monkeypatch.setattr(provider_server, "TIMEOUT_SECONDS", 3.0)
    stub_providers.state.faults = {"twilio": {"rules": {"+14155550123": {"outcome": "timeout", "times": 1}}}}
    ids = queued_sms(send, 5, user_id="u-en-1")

    def standard_worker():
        caller = batch.Caller()
        try:
            batch.deliver_batch(ids, "standard", caller)
        finally:
            caller.close()
            from django.db import connection

            connection.close()

    thread = threading.Thread(target=standard_worker)
    thread.start()
    deadline = time.monotonic() + 10
    while not Attempt.objects.filter(notification__in=ids).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    otp = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "654321"}}, key="login-2").json()["id"]
    dispatch.deliver(otp)
    in_flight = list(Attempt.objects.filter(notification__in=ids).values_list("result", flat=True))
    thread.join(timeout=30)

    otp_row = Notification.objects.get(pk=otp)
    assert (otp_row.state, otp_row.provider, otp_row.attempt_count) == (State.SENT, "twilio", 1)
    assert in_flight == [""]  # sent while the batch's one call (its share of the bulkhead) was still out
    assert states(ids) == {State.QUEUED: 1, State.SENT: 4}  # that call timed out (a retry); then one at a time


def test_a_retry_in_a_batch_whose_sent_marker_says_accepted_is_not_sent_again(send, stub_providers, caller):
    ids = queued_sms(send, 3, user_id="u-en-1")
    Notification.objects.filter(pk=ids[1]).update(attempt_count=1)  # a worker died after the provider took it
    sent_marker.put(ids[1], "twilio", "SMearlier")

    batch.deliver_batch(ids, "standard", caller)

    retried = Notification.objects.get(pk=ids[1])
    assert (retried.state, retried.provider_ref, retried.reason) == (State.SENT, "SMearlier", "sent-marker")
    assert sorted(m["text"] for m in stub_providers.state.messages) == [
        "Your order 0 has shipped.",
        "Your order 2 has shipped.",
    ]


def test_a_row_retried_after_the_batch_read_it_is_left_to_its_own_task(
    send, stub_providers, caller, tmp_path, settings
):
    budgeted(tmp_path, stub_providers, settings, concurrency=10)
    ids = queued_sms(send, 3, user_id="u-en-1")
    items, single = batch._split(list(Notification.objects.filter(pk__in=ids).select_related("recipient")))
    assert single == []
    # Between the batch's read and its wave: a worker died after the provider took it, and the sweeper released it
    # (which enqueued it again).
    Notification.objects.filter(pk=ids[1]).update(attempt_count=1)
    sent_marker.put(ids[1], "twilio", "SMearlier")
    for item, slot in zip(items, batch._slots(items[0].target.provider.config, 3, "standard"), strict=True):
        item.slot = slot

    assert batch._send_wave(items, "standard", caller) is False

    retried = Notification.objects.get(pk=ids[1])
    assert (retried.state, retried.attempts.count()) == (State.QUEUED, 0)  # the claim takes first tries only
    assert len(stub_providers.state.messages) == 2
    config = items[0].target.provider.config
    assert (config.concurrency, redis_client().zcard(f"inflight:{config.name}")) == (10, 0)  # every slot given back

    dispatch.deliver(ids[1])  # its own task: the sent-marker says the provider has it

    retried = Notification.objects.get(pk=ids[1])
    assert (retried.state, retried.provider_ref, retried.reason) == (State.SENT, "SMearlier", "sent-marker")
    assert len(stub_providers.state.messages) == 2


def test_rows_of_a_campaign_paused_after_their_tasks_were_popped_are_dropped_and_keep_the_budget(
    send, stub_providers, caller, tmp_path, settings, marketer, approver
):
    budgeted(tmp_path, stub_providers, settings, rate=4.0, burst=4.0)
    campaign = submitted(marketer, segment=list_segment(["u-en-1"], name="Paused"))
    campaign = campaign_actions.approve(campaign, approver, campaign.content_hash)
    assert campaign_actions.start(campaign)
    ids = queued_sms(send, 4, user_id="u-en-1")
    Notification.objects.filter(pk__in=ids).update(campaign=campaign, queued_at=timezone.now())  # fed
    Campaign.objects.filter(pk=campaign.pk).update(state=Campaign.State.PAUSED)
    HUEYS["standard"].flush()  # the batch worker popped their tasks

    batch.deliver_batch(ids, "standard", caller)

    assert states(ids) == {State.QUEUED: 4}
    assert stub_providers.state.messages == []
    # Not handed to the single path, whose gate would take a second token each and, finding the bucket the batch
    # emptied, put them back on the queue for as long as the pause lasts: the feeder hands them over on resume.
    assert HUEYS["standard"].pending() == [] and HUEYS["standard"].scheduled() == []


def test_a_claim_that_fails_gives_its_bulkhead_slots_back_and_its_rows_their_tasks(
    send, stub_providers, caller, tmp_path, settings, monkeypatch
):
    budgeted(tmp_path, stub_providers, settings, concurrency=10, timeout=10.0)
    ids = queued_sms(send, 5)
    HUEYS["standard"].flush()  # the batch worker popped their tasks

    def failing_claim(*args):
        raise DatabaseError("deadlock detected")

    monkeypatch.setattr(batch, "_claim", failing_claim)
    with pytest.raises(DatabaseError):
        batch.deliver_batch(ids, "standard", caller)

    assert redis_client().zcard("inflight:twilio") == 0  # not held until they expire (25 s here)
    assert states(ids) == {State.QUEUED: 5}
    assert sorted(t.args[0] for t in HUEYS["standard"].scheduled()) == sorted(ids)


def test_an_error_mid_batch_leaves_no_row_without_a_task_for_longer_than_a_lease(
    send, stub_providers, caller, settings, monkeypatch
):
    monkeypatch.setattr(batch, "WAVE", 5)
    ids = queued_sms(send, 20)
    HUEYS["standard"].flush()  # the worker popped the batch's 20 tasks
    real = batch._mark_sent

    def once_failing(*args):
        monkeypatch.setattr(batch, "_mark_sent", real)
        raise DatabaseError("server closed the connection unexpectedly")

    monkeypatch.setattr(batch, "_mark_sent", once_failing)
    with pytest.raises(DatabaseError):
        batch.deliver_batch(ids, "standard", caller)
    assert states(ids) == {State.SENDING: 5, State.QUEUED: 15}  # the first wave's calls made, its markers written

    lease = settings.NOTIFY["LEASE"]["standard"]
    sweeper.sweep(now=timezone.now() + timedelta(seconds=lease + settings.NOTIFY["SWEEP_INTERVAL"]))

    queue = HUEYS["standard"]
    assert sorted({t.args[0] for t in queue.pending() + queue.scheduled()}) == sorted(ids)


@pytest.mark.django_db(transaction=True)
def test_four_workers_racing_in_waves_on_shuffled_ids_send_each_once(send, stub_providers, monkeypatch):
    monkeypatch.setattr(batch, "WAVE", 7)
    stub_providers.state.faults = {"twilio": {"latency_ms": 20}}
    ids = queued_sms(send, 120)

    assert deliver_racing(ids, 4, shuffled=True) == []

    assert states(ids) == {State.SENT: 120}
    texts = [m["text"] for m in stub_providers.state.messages]
    assert len(texts) == len(set(texts)) == 120
    assert Attempt.objects.filter(notification__in=ids).count() == 120


def test_a_row_that_no_longer_renders_fails_with_its_render_error_and_the_rest_go(send, stub_providers, caller):
    ids = queued_sms(send, 3)
    Notification.objects.filter(pk=ids[0]).update(params={})  # the template's {{ order }} has nothing to show

    batch.deliver_batch(ids, "standard", caller)

    failed = Notification.objects.get(pk=ids[0])
    assert (failed.state, failed.reason) == (State.FAILED, "render-error")
    assert "order" in failed.last_error
    assert states(ids[1:]) == {State.SENT: 2}
    assert len(stub_providers.state.messages) == 2


# Committed and flushed after, not rolled back: ANALYZE writes the table's row count in place, which a rollback
# keeps, and 23,000 rows believed there skewed the plans of later tests; the flush's TRUNCATE resets it.
@pytest.mark.django_db(transaction=True)
def test_a_batch_finds_its_rows_by_key_whatever_the_statistics_say(send, stub_providers, caller):
    # Statistics of a table of 20,000 rows sent, none queued; then a backlog of 3,000 arrives.
    first = Notification.objects.get(pk=queued_sms(send, 1)[0])
    copies_in_sql(first, 20_000, "s", state=State.SENT)
    analyze()
    copies = copies_of(first, 3000, "c")
    Notification.objects.bulk_create(copies)
    ids = [str(first.pk)] + [str(copy.pk) for copy in copies[:199]]

    with CaptureQueriesContext(connection) as captured:
        batch.deliver_batch(ids, "standard", caller)
    assert states(ids) == {State.SENT: 200}

    statements = [q["sql"] for q in captured.captured_queries if '"notifications_notification"' in q["sql"]]
    reads_and_moves = [sql for sql in statements if sql.startswith(("SELECT", "WITH moved", "WITH done"))]
    kinds = [sql.split(" ", 2)[1] for sql in reads_and_moves]
    waves = math.ceil(200 / batch.WAVE)
    assert (kinds.count("moved"), kinds.count("done")) == (waves, waves)  # each wave's claim, and its results
    for sql in reads_and_moves:
        plan = plan_of(sql)
        # Before: the read and the claim of 200 read all 3,000 queued rows through the queue's partial index and
        # hashed them; with the state's condition out of that index's reach, a seq scan of every row.
        assert "notification_tier_queue_idx" not in plan and "Seq Scan on notifications_notification" not in plan, plan
        assert "notifications_notification_pkey" in plan, plan
