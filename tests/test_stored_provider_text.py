"""What a provider answers, stored whatever it holds; a wave's per-row values round-trip through its statements.

A reference or an error PostgreSQL cannot store (NUL, a lone surrogate, a reference longer than its
column) used to fail the statement recording it, and in a batch the whole wave's results: rows left in
sending, the sweeper's retry failing again on the same sent-marker. Also the jsonb per-row lookups of
``batch._update_sql_postgresql`` (every value type a wave writes, any text form of a key) and the
server-bound cursor's connection health check.
"""

import json
import uuid
from datetime import datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications.delivery import batch, dispatch, sent_marker
from backend.notifications.models import Attempt, Notification, State
from tests.http_servers import answering_server
from tests.plans_setup import plan_of
from tests.providers_setup import write_providers_file
from tests.test_delivery_batches import queued_sms, states

pytestmark = pytest.mark.usefixtures("demo_data", "stub_providers")


def providers_at(settings, tmp_path, stub_providers, **urls: str) -> None:
    """Every provider on the stub but those of ``urls`` (name → base URL)."""
    overrides = {name: {"base_url": url} for name, url in urls.items()}
    path = write_providers_file(tmp_path / "p.toml", stub_providers.url, **overrides)
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}


# ---------------------------------------------------------------------------------------------------------------------
# Values round-tripping through the jsonb objects

TRICKY = [
    "رمز التحقق الخاص بك هو 493817",  # Arabic
    "کد تأیید\u200cشما ۴۹۳۸۱۷ است",  # Persian with ZWNJ and Persian digits
    "👩🏽\u200d💻 🇮🇷 🎉 \U0001f600",  # emoji, ZWJ sequence, flags (surrogate pairs in JSON)
    "\u200f\u202eRTL override\u202c\u2066isolate\u2069\u200e",  # bidi marks
    "it's \"quoted\" `back` ''",
    "C:\\path\\to\\n \\u0000 \\\\ \\x00",  # backslashes, a literal \u0000 (6 characters), no NUL
    "%s %(x)s $1 $$ ?::jsonb -> 'a'",  # placeholders and operators as text
    "line\nbreak\r\ttab \x01\x1f\x7f \u2028\u2029 \ufeff \ufffd",
    "",
    "x" * 255,
]


def test_text_values_round_trip_through_the_json_lookups(send):
    ids = queued_sms(send, len(TRICKY))
    notifications = Notification.objects.filter(pk__in=ids)
    attempts = [Attempt(notification=n, number=1, provider="twilio", started_at=timezone.now()) for n in notifications]
    Attempt.objects.bulk_create(attempts)
    keys = [a.pk for a in attempts]
    long_error = ("خطأ " * 30_000) + "🎉"  # 120k characters in a text column
    tehran = datetime(2026, 3, 20, 23, 59, 59, 999999, tzinfo=ZoneInfo("Asia/Tehran"))
    per_row = {
        "provider_ref": dict(zip(keys, TRICKY, strict=True)),
        "error": {keys[0]: long_error, **{k: t for k, t in zip(keys[1:], TRICKY[1:], strict=True)}},
        "latency_ms": {keys[0]: 0, keys[1]: 2**31 - 1, keys[2]: 17},
        "cost": {keys[0]: Decimal("0.00001"), keys[1]: Decimal("12345.67891"), keys[2]: Decimal("-0.5")},
        "started_at": {keys[0]: tehran, keys[1]: tehran.astimezone(ZoneInfo("UTC"))},
        "sms_segments": {keys[0]: 32767},
        "result": {keys[3]: None},  # None: keeps the row's value
    }
    Attempt.objects.filter(pk=keys[3]).update(result="sent")

    changed = batch.update_rows(Attempt, keys, {}, per_row)

    assert sorted(changed) == sorted(keys)
    got = {a.pk: a for a in Attempt.objects.filter(pk__in=keys)}
    assert [got[k].provider_ref for k in keys] == TRICKY
    assert got[keys[0]].error == long_error
    assert [got[k].error for k in keys[1:]] == TRICKY[1:]
    assert [got[k].latency_ms for k in keys[:4]] == [0, 2**31 - 1, 17, None]
    assert [got[k].cost for k in keys[:4]] == [Decimal("0.00001"), Decimal("12345.67891"), Decimal("-0.5"), None]
    assert got[keys[0]].started_at == tehran and got[keys[1]].started_at == tehran
    assert got[keys[0]].sms_segments == 32767
    assert got[keys[3]].result == "sent"


def test_json_params_round_trip_and_missing_or_none_keep_the_row_s_value(send):
    ids = queued_sms(send, 3)
    Notification.objects.filter(pk__in=ids).update(state=State.SENDING)
    params = {
        "name": "مریم \u200f👩🏽\u200d💻",
        "quote": "a'b\"c\\d",
        "literal": "\\u0000",
        "nested": {"list": [1, 2.5, True, None, "x"], "empty": {}, "big": 2**62, "tiny": 1e-7},
        "code": "***",
    }
    moved = batch._move(
        ids, State.SENDING, State.SENT, "", {"provider": "twilio"},
        {"params": {ids[0]: params, ids[1]: None}, "provider_ref": {ids[0]: "SM1"}},
    )  # fmt: skip
    assert moved == set(ids)
    rows = {str(n.pk): n for n in Notification.objects.filter(pk__in=ids)}
    assert rows[ids[0]].params == params
    assert rows[ids[1]].params == {"order": "1"} and rows[ids[2]].params == {"order": "2"}
    assert [rows[pk].provider_ref for pk in ids] == ["SM1", "", ""]


# ---------------------------------------------------------------------------------------------------------------------
# Keys: the rows are found by the uuid, their values by the key's text


def test_a_key_in_another_text_form_still_gets_its_value(send):
    # A UUID's text that PostgreSQL reads as the same key (upper case, no hyphens) is found by ``= ANY``; its value
    # is looked up under ``id::text`` (lower case, hyphens), so the key is written that way first.
    ids = queued_sms(send, 2)
    upper, bare = ids[0].upper(), ids[1].replace("-", "")
    Notification.objects.filter(pk__in=ids).update(state=State.SENDING)

    moved = batch._move(
        [upper, bare], State.SENDING, State.SENT, "", {"provider": "twilio"},
        {"provider_ref": {upper: "SM-upper", bare: "SM-bare"}},
    )  # fmt: skip

    assert {m.lower().replace("-", "") for m in moved} == {i.replace("-", "") for i in ids}
    refs = dict(Notification.objects.filter(pk__in=ids).values_list("id", "provider_ref"))
    assert refs == {uuid.UUID(ids[0]): "SM-upper", uuid.UUID(ids[1]): "SM-bare"}


def test_uuid_objects_as_keys(send):
    ids = queued_sms(send, 2)
    keys = [uuid.UUID(pk) for pk in ids]
    changed = batch.update_rows(Notification, keys, {}, {"provider_ref": {keys[0]: "A", keys[1]: "B"}})
    assert sorted(map(str, changed)) == sorted(ids)
    assert dict(Notification.objects.filter(pk__in=ids).values_list("id", "provider_ref")) == {
        keys[0]: "A", keys[1]: "B"
    }  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# A provider's reference or error text PostgreSQL cannot store


def test_a_reference_holding_a_nul_does_not_lose_the_wave_s_records(send, stub_providers, settings, tmp_path, caller):
    ids = queued_sms(send, 3)
    answers = [(201, b'{"sid": "SM\\u0000evil"}'), (201, b'{"sid": "SMok1"}'), (201, b'{"sid": "SMok2"}')]
    providers_at(settings, tmp_path, stub_providers, twilio=answering_server(answers))

    batch.deliver_batch(ids, "standard", caller)

    assert states(ids) == {State.SENT: 3}
    assert sorted(Attempt.objects.filter(notification__in=ids).values_list("result", flat=True)) == ["sent"] * 3


def test_an_error_holding_a_lone_surrogate_does_not_lose_the_wave_s_records(
    send, stub_providers, settings, tmp_path, caller
):
    # A JSON error body may escape any code unit: json.loads gives a str with a lone surrogate, which
    # json.dumps escapes again and PostgreSQL's jsonb refuses ("Unicode low surrogate must follow a high surrogate").
    ids = queued_sms(send, 3)
    bad = b'{"code": 30001, "message": "queue overflow \\ud800"}'
    providers_at(settings, tmp_path, stub_providers, twilio=answering_server([(400, bad)] * 3))

    batch.deliver_batch(ids, "standard", caller)

    errors = list(Attempt.objects.filter(notification__in=ids).values_list("result", "error"))
    assert len(errors) == 3 and all(result == "permanent" for result, _ in errors), errors


def test_the_single_path_with_a_lone_surrogate_in_the_error(send, stub_providers, settings, tmp_path):
    [pk] = queued_sms(send, 1)
    bad = b'{"code": 30001, "message": "queue overflow \\ud800"}'
    providers_at(settings, tmp_path, stub_providers, twilio=answering_server([(400, bad)]))

    dispatch.deliver(pk)

    assert Notification.objects.get(pk=pk).state == State.FAILED


def test_a_retry_stores_a_reference_its_sent_marker_kept_from_before(send, stub_providers, caller):
    # A marker written before references were made storable: the retry that finds it marks the row sent with it.
    [pk] = queued_sms(send, 1)
    Notification.objects.filter(pk=pk).update(attempt_count=1)
    sent_marker.put(pk, "twilio", "SM\x00old")

    batch.deliver_batch([pk], "standard", caller)

    row = Notification.objects.get(pk=pk)
    assert (row.state, row.provider_ref, row.reason) == (State.SENT, "SM\ufffdold", "sent-marker")
    assert stub_providers.state.messages == []


# ---------------------------------------------------------------------------------------------------------------------
# Plans: the attempt table's UPDATE with statistics taken when it was empty


@pytest.mark.django_db(transaction=True)
def test_the_record_finds_attempts_by_key_with_stale_statistics(send, stub_providers, caller):
    ids = queued_sms(send, 120)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE notifications_attempt")  # empty: 0 rows believed
        cursor.execute(
            "INSERT INTO notifications_attempt (notification_id, number, provider, started_at, result, error,"
            " provider_ref, sms_encoding, currency) SELECT %s, 1, 'twilio', now(), 'sent', '', 'SM' || g, '', ''"
            " FROM generate_series(1, 60000) g",
            [ids[0]],
        )
    with CaptureQueriesContext(connection) as captured:
        batch.deliver_batch(ids[1:], "standard", caller)
    assert states(ids[1:]) == {State.SENT: 119}
    records = [q["sql"] for q in captured.captured_queries if q["sql"].startswith("WITH done")]
    assert records
    for sql in records:
        plan = plan_of(sql)
        # (the notification table here is 120 rows: a seq scan of it is right; the 20,000-row case is
        # test_delivery_batches.py's)
        assert "Seq Scan on notifications_attempt" not in plan, plan
        assert "notifications_attempt_pkey" in plan, plan


# ---------------------------------------------------------------------------------------------------------------------
# The server-bound cursor checks the connection as Django's cursors do


@pytest.mark.django_db(transaction=True)
def test_the_bound_cursor_checks_the_connection_as_django_s_cursors_do(send):
    ids = queued_sms(send, 1)
    Notification.objects.filter(pk__in=ids).update(state=State.SENDING)
    connection.health_check_enabled = True
    connection.health_check_done = False  # as close_old_connections leaves a kept connection
    # A closed psycopg connection stands for a dead one (PostgreSQL restarted, a proxy's idle timeout):
    # Django's own cursors would find it unusable and reconnect.
    connection.connection.close()
    try:
        assert batch._move(ids, State.SENDING, State.SENT, "", {"provider": "twilio"}) == set(ids)
    finally:
        connection.close()


# ---------------------------------------------------------------------------------------------------------------------
# A reference longer than its column: cut, with a warning, on both paths


@pytest.mark.django_db(transaction=True)
def test_a_long_reference_on_the_single_path(send, stub_providers, settings, tmp_path):
    [pk] = queued_sms(send, 1)
    sid = "SM" + "x" * 298
    answer = json.dumps({"sid": sid}).encode()
    providers_at(settings, tmp_path, stub_providers, twilio=answering_server([(201, answer)]))
    dispatch.deliver(pk)

    row = Notification.objects.get(pk=pk)
    assert row.state == State.SENT and row.provider_ref == sid[:255]


def test_a_long_reference_in_a_batch(send, stub_providers, settings, tmp_path, caller):
    [pk] = queued_sms(send, 1)
    sid = "SM" + "x" * 298
    answer = json.dumps({"sid": sid}).encode()
    providers_at(settings, tmp_path, stub_providers, twilio=answering_server([(201, answer)]))
    batch.deliver_batch([pk], "standard", caller)

    row = Notification.objects.get(pk=pk)
    assert row.state == State.SENT and row.provider_ref == sid[:255]


def nul_answers(count: int) -> str:
    """A local server answering ``count`` calls with HTTP 500 and a UTF-8 body holding a NUL byte; its URL."""
    return answering_server([(500, b"upstream \x00 broke")] * count, content_type="text/plain; charset=utf-8")


def test_an_error_answer_with_a_nul_byte_is_recorded_not_lost(send, stub_providers, settings, tmp_path, caller):
    # PostgreSQL text cannot hold NUL: quoted into the recording statement, one such answer failed the whole
    # wave's results, leaving its rows in sending for the sweeper to send again.
    ids = queued_sms(send, 3)
    providers_at(settings, tmp_path, stub_providers, twilio=nul_answers(3))

    batch.deliver_batch(ids, "standard", caller)

    assert states(ids) == {State.QUEUED: 3}  # each waits for its retry
    errors = list(Attempt.objects.filter(notification__in=ids).values_list("result", "error"))
    assert errors == [("transient", "twilio answered HTTP 500: upstream \ufffd broke")] * 3


def test_the_single_path_records_such_an_answer_too(send, stub_providers, settings, tmp_path):
    [pk] = queued_sms(send, 1)
    providers_at(settings, tmp_path, stub_providers, twilio=nul_answers(1), vonage=nul_answers(1))

    dispatch.deliver(pk)

    errors = list(Attempt.objects.filter(notification=pk).values_list("provider", "error"))
    assert ("twilio", "twilio answered HTTP 500: upstream \ufffd broke") in errors
    assert Notification.objects.get(pk=pk).last_error.endswith("\ufffd broke")
