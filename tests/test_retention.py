"""Retention (backend/notifications/retention.py, campaigns/archive.py): what goes, stays, and what a campaign keeps."""

import io
import re
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import OperationalError, connection
from django.utils import timezone

from backend.notifications import retention
from backend.notifications.models import (
    Attempt,
    DeadLetter,
    Notification,
    Receipt,
    State,
    StateChange,
)
from backend.notifications.receipts import apply as receipts
from backend.support.models import ContactReveal
from backend.support.reveal import reveal
from campaigns import actions, ledger, report
from campaigns.models import Campaign
from inbox.models import InboxMessage
from tests import processes
from tests.campaigns_setup import cancelled_mid_run
from tests.plans_setup import copies_of

pytestmark = pytest.mark.usefixtures("demo_data")

DAYS = 90
# Each case: (state, days since its last change, deleted?). The cutoff is exactly DAYS days before now,
# and a row changed at that very instant is kept (strictly older goes).
CASES = [
    (State.SENT, 91, True),
    (State.DELIVERED, 91, True),
    (State.UNDELIVERED, 91, True),
    (State.FAILED, 91, True),
    (State.SUPPRESSED, 91, True),
    (State.EXPIRED, 91, True),
    (State.CANCELLED, 91, True),
    (State.SENT, 90, False),
    (State.SENT, 89, False),
    (State.QUEUED, 400, False),
    (State.SCHEDULED, 400, False),
    (State.SENDING, 400, False),
]


def aged(row: Notification, state: str, now, days: float) -> Notification:
    """``row`` in ``state``, last changed ``days`` before ``now``."""
    Notification.objects.filter(pk=row.pk).update(state=state, updated_at=now - timedelta(days=days))
    return row


@pytest.fixture
def now():
    return timezone.now()


@pytest.fixture
def accepted(send) -> Notification:
    return Notification.objects.get(
        pk=send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}).json()["id"]
    )


def test_it_deletes_exactly_the_rows_that_ended_before_the_cutoff(accepted, now):
    rows = copies_of(accepted, len(CASES), "case")
    Notification.objects.bulk_create(rows)
    for row, (state, days, _) in zip(rows, CASES, strict=True):
        aged(row, state, now, days)
    aged(accepted, State.SENT, now, 1)

    done = retention.purge(now=now, days=DAYS, pause=0)

    kept = set(Notification.objects.values_list("pk", flat=True))
    assert {(state, days): row.pk in kept for row, (state, days, _) in zip(rows, CASES, strict=True)} == {
        (state, days): not deleted for state, days, deleted in CASES
    }
    assert accepted.pk in kept
    assert (done.deleted, done.cutoff) == (sum(deleted for *_, deleted in CASES), now - timedelta(days=DAYS))


def test_its_history_goes_with_it_and_its_inbox_message_stays(accepted, send, now):
    newer = Notification.objects.get(
        pk=send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "2"}}, "o-2").json()["id"]
    )
    StateChange.objects.create(notification=accepted, from_state="", to_state=State.QUEUED)
    attempt = Attempt.objects.create(notification=accepted, number=1, provider="twilio", started_at=now, result="sent")
    Receipt.objects.create(
        notification=accepted, provider="twilio", provider_ref="SM1", status="delivered", outcome="delivered"
    )
    DeadLetter.objects.create(notification=accepted, attempts=5)
    message = InboxMessage.objects.create(recipient=accepted.recipient, notification=accepted, title="t", body="b")
    Notification.objects.filter(pk=newer.pk).update(digest=accepted)  # folded into a digest that is deleted
    aged(accepted, State.DELIVERED, now, 120)

    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1

    assert not Notification.objects.filter(pk=accepted.pk).exists()
    for model in (StateChange, Attempt, Receipt, DeadLetter):
        assert not model.objects.filter(notification_id=accepted.pk).exists(), model.__name__
    assert not Attempt.objects.filter(pk=attempt.pk).exists()
    message.refresh_from_db()
    assert (message.notification_id, message.title) == (None, "t")
    assert Notification.objects.get(pk=newer.pk).digest_id is None


def test_a_contact_revealed_on_its_page_keeps_its_audit_row_and_the_purge_goes_on(accepted, now):
    support = User.objects.get(username="support")
    reveal(support, accepted.recipient, "email", accepted, reason="ticket 1")
    aged(accepted, State.SENT, now, 120)

    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1

    assert list(ContactReveal.objects.values_list("notification_id", "recipient_user_id")) == [(None, "u-en-1")]


def test_a_row_folded_into_a_digest_not_yet_sent_stays_until_the_digest_ends(accepted, send, now):
    digest = Notification.objects.get(
        pk=send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "9"}}, "digest").json()["id"]
    )
    Notification.objects.filter(pk=accepted.pk).update(digest=digest)
    aged(accepted, State.SUPPRESSED, now, 120)
    aged(digest, State.SCHEDULED, now, 120)  # held by quiet hours, say: its mail still reads the rows it folds

    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 0
    aged(digest, State.SENT, now, 120)
    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 2


def test_a_slice_that_fails_on_a_deadlock_is_left_for_the_next_run_and_the_others_go_on(accepted, now, monkeypatch):
    rows = copies_of(accepted, 400, "deadlock", params={"pad": "x" * 800})
    Notification.objects.bulk_create(rows)
    Notification.objects.filter(pk__in=[r.pk for r in rows]).update(
        state=State.SENT, updated_at=now - timedelta(days=95)
    )
    monkeypatch.setattr(retention, "PAGES", 4)
    real, calls = retention.delete_notifications, []

    def deadlocked_once(ids):
        calls.append(len(ids))
        if len(calls) == 1:
            raise lock_conflict()
        return real(ids)

    monkeypatch.setattr(retention, "delete_notifications", deadlocked_once)
    done = retention.purge(now=now, days=DAYS, pause=0)

    assert done.skipped_slices == 1 and done.deleted == 400 - calls[0]
    assert retention.purge(now=now, days=DAYS, pause=0).deleted == calls[0]


def lock_conflict() -> OperationalError:
    """What Django raises when PostgreSQL breaks a deadlock."""
    exc = OperationalError("deadlock detected")
    exc.__cause__ = psycopg.errors.DeadlockDetected("deadlock detected")
    return exc


def test_an_error_other_than_a_lock_conflict_stops_the_run(accepted, now, monkeypatch):
    aged(accepted, State.SENT, now, 200)

    def timed_out(ids):
        exc = OperationalError("canceling statement due to statement timeout")
        exc.__cause__ = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
        raise exc

    monkeypatch.setattr(retention, "delete_notifications", timed_out)
    with pytest.raises(OperationalError, match="statement timeout"):
        retention.purge(now=now, days=DAYS, pause=0)


def test_every_table_that_refers_to_a_notification_is_followed_as_its_on_delete_says():
    # A new relation fails here: retention deletes with one statement a table, not with Django's collector.
    # Every one the database checks counts, hidden or not.
    assert sorted(retention.relations()) == [
        ("inbox_inboxmessage", "notification_id", "set null"),
        ("notifications_attempt", "notification_id", "delete"),
        ("notifications_deadletter", "notification_id", "delete"),
        ("notifications_notification", "digest_id", "set null"),
        ("notifications_receipt", "notification_id", "delete"),
        ("notifications_statechange", "notification_id", "delete"),
        ("support_contactreveal", "notification_id", "set null"),  # related_name="+": hidden from Django's list
    ]


def test_a_dry_run_counts_what_a_run_deletes_and_changes_nothing(accepted, now):
    rows = copies_of(accepted, 30, "dry")
    Notification.objects.bulk_create(rows)
    for n, row in enumerate(rows):
        aged(row, State.SENT, now, 100 if n % 3 else 10)

    dry = retention.purge(now=now, days=DAYS, dry_run=True, pause=0)
    assert Notification.objects.count() == 31
    real = retention.purge(now=now, days=DAYS, pause=0)

    assert (dry.deleted, real.deleted, Notification.objects.count()) == (20, 20, 11)


def test_the_table_is_read_in_slices_of_its_pages_and_every_slice_is_purged(accepted, now, monkeypatch):
    rows = copies_of(accepted, 400, "slice", params={"pad": "x" * 800})  # ~1 KiB a row: dozens of pages
    Notification.objects.bulk_create(rows)
    Notification.objects.filter(pk__in=[row.pk for row in rows]).update(
        state=State.SENT, updated_at=now - timedelta(days=95)
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size(%s) / 8192", [Notification._meta.db_table])
        pages = cursor.fetchone()[0]
    monkeypatch.setattr(retention, "PAGES", 4)

    done = retention.purge(now=now, days=DAYS, pause=0)

    assert pages >= 20
    assert (done.deleted, done.slices) == (400, -(-pages // 4))
    assert list(Notification.objects.values_list("pk", flat=True)) == [accepted.pk]


def test_zero_days_keeps_everything(accepted, now):
    aged(accepted, State.SENT, now, 10_000)
    assert retention.purge(now=now, days=0) is None
    assert Notification.objects.filter(pk=accepted.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_a_row_another_transaction_holds_is_left_for_the_next_run(demo_data, send, now):
    first, second = (
        send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": n}}, f"lock-{n}").json()["id"] for n in "12"
    )
    Notification.objects.filter(pk__in=[first, second]).update(state=State.SENT, updated_at=now - timedelta(days=95))
    with psycopg.connect(processes.test_database_url()) as other:
        # A receipt writing the row at that instant, say.
        other.execute(f"SELECT 1 FROM {Notification._meta.db_table} WHERE id = %s FOR UPDATE", [first])
        assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1
        assert list(Notification.objects.values_list("pk", flat=True)) == [uuid.UUID(first)]
    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1
    assert not Notification.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_dead_letter_being_replayed_keeps_its_notification_for_the_next_run(demo_data, send, now):
    ids = [send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": n}}, f"dl-{n}").json()["id"] for n in "12"]
    Notification.objects.filter(pk__in=ids).update(state=State.FAILED, updated_at=now - timedelta(days=95))
    letters = [DeadLetter.objects.create(notification_id=pk, attempts=5) for pk in ids]
    with psycopg.connect(processes.test_database_url()) as other:
        # A replay locks the dead letter first, then its notification: the slice must not wait for it.
        other.execute(f"SELECT 1 FROM {DeadLetter._meta.db_table} WHERE id = %s FOR UPDATE", [letters[0].pk])
        assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1
        assert list(Notification.objects.values_list("pk", flat=True)) == [uuid.UUID(ids[0])]
    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1


@pytest.mark.django_db(transaction=True)
def test_a_receipt_for_a_row_deleted_while_it_arrived_is_unknown_not_a_500(demo_data, send, now, monkeypatch):
    pk = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}).json()["id"]
    Notification.objects.filter(pk=pk).update(
        state=State.SENT, provider="twilio", provider_ref="SM1", updated_at=now - timedelta(days=120)
    )
    real_find = receipts.find

    def found_then_purged(provider_names, provider_ref):
        row = real_find(provider_names, provider_ref)
        assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1  # between the lookup and the write
        return row

    monkeypatch.setattr(receipts, "find", found_then_purged)

    assert receipts.apply(["twilio"], receipts.ProviderReceipt("SM1", "delivered", "delivered")) == "unknown"
    assert not Receipt.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_contact_revealed_on_the_page_of_a_row_just_deleted_is_audited_against_the_person(demo_data, send, now):
    row = Notification.objects.get(
        pk=send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "1"}}).json()["id"]
    )
    Notification.objects.filter(pk=row.pk).update(state=State.SENT, updated_at=now - timedelta(days=95))
    assert retention.purge(now=now, days=DAYS, pause=0).deleted == 1  # while the agent's page was open

    assert (
        reveal(User.objects.get(username="support"), row.recipient, "email", row, reason="ticket 1")
        == row.recipient.email
    )

    assert list(ContactReveal.objects.values_list("notification_id", "recipient_user_id")) == [(None, "u-en-1")]


# --- campaigns ------------------------------------------------------------------------------------


@pytest.fixture
def finished(marketer, approver) -> Campaign:
    return cancelled_mid_run(marketer, approver)


@pytest.fixture
def ended(finished, now) -> Campaign:
    """``finished`` with its row in flight sent, all 100 days ago."""
    Notification.objects.filter(campaign=finished, state=State.SENDING).update(state=State.SENT, provider="smtp")
    long_ago = now - timedelta(days=100)
    Notification.objects.filter(campaign=finished).update(updated_at=long_ago)
    Campaign.objects.filter(pk=finished.pk).update(updated_at=long_ago)
    return Campaign.objects.get(pk=finished.pk)


def test_a_campaign_that_ended_long_ago_keeps_its_figures_when_its_rows_go(ended, now, client, approver, marketer):
    before = (ledger.ledger(ended), report.outcome_rows(ended), report.sms_costs(ended))
    assert before[0].counts[State.SENT] == 2 and before[0].cancel.cancelled == 1

    done = retention.purge(now=now, days=DAYS, pause=0)

    campaign = Campaign.objects.get(pk=ended.pk)
    assert (done.frozen_campaigns, done.deleted, campaign.archived_at) == ([ended.pk], 3, now)
    assert not Notification.objects.filter(campaign=ended).exists()
    assert (ledger.ledger(campaign), report.outcome_rows(campaign), report.sms_costs(campaign)) == before
    client.force_login(approver)
    page = client.get(f"/campaigns/{ended.pk}/").content.decode()
    assert 'id="archived"' in page and 'id="ledger-csv"' not in page and 'id="resend-remainder"' not in page
    assert re.search(r'<td class="cp-number" data-state="sent">2</td>', page)
    csv = client.get(f"/campaigns/{ended.pk}/ledger.csv")
    assert csv.status_code == 410 and "deleted by retention" in csv.content.decode()
    for draft in (actions.resend_remainder, actions.draft_correction):
        with pytest.raises(actions.CampaignRefused, match="is no longer known"):
            draft(campaign, marketer)


def test_a_campaign_with_a_row_still_in_flight_is_not_frozen_and_keeps_its_rows(finished, now):
    Notification.objects.filter(campaign=finished).update(updated_at=now - timedelta(days=100))
    Campaign.objects.filter(pk=finished.pk).update(updated_at=now - timedelta(days=100))

    done = retention.purge(now=now, days=DAYS, pause=0)

    assert (done.frozen_campaigns, done.deleted) == ([], 0)  # u-en-1 is still sending
    assert Notification.objects.filter(campaign=finished).count() == 3


def test_a_campaign_that_ended_recently_keeps_its_old_rows(ended, now):
    Campaign.objects.filter(pk=ended.pk).update(updated_at=now - timedelta(days=10))

    done = retention.purge(now=now, days=DAYS, pause=0)

    assert (done.frozen_campaigns, done.deleted) == ([], 0)
    assert Campaign.objects.get(pk=ended.pk).archived_at is None


# --- the command and the embedded default ----------------------------------------------------------------------


def test_the_command_says_what_it_did_or_would_do(accepted, now):
    aged(accepted, State.SENT, now, 200)
    out = io.StringIO()
    call_command("purge_notifications", "--dry-run", stdout=out)
    assert re.fullmatch(
        r"would delete 1 notification that ended before \S+ \S+ UTC \(kept 90 days\); campaigns to freeze: none; "
        r"\d+ slices? in \d+\.\d s\.\n",
        out.getvalue(),
    )
    assert Notification.objects.filter(pk=accepted.pk).exists()


def test_the_command_says_when_a_slice_was_skipped(accepted, now, monkeypatch):
    aged(accepted, State.SENT, now, 200)

    def deadlocked(ids):
        raise lock_conflict()

    monkeypatch.setattr(retention, "delete_notifications", deadlocked)
    out, err = io.StringIO(), io.StringIO()
    call_command("purge_notifications", stdout=out, stderr=err)

    assert out.getvalue().startswith("deleted 0 notifications that ended before")
    assert err.getvalue() == "1 slice skipped on a lock (logged): the next run takes them.\n"
    assert Notification.objects.filter(pk=accepted.pk).exists()


@pytest.mark.parametrize("days", ["0", "36501", "99999999"])
def test_the_command_refuses_a_retention_out_of_bounds(days):
    with pytest.raises(CommandError, match=re.escape(f"--days {days}: keep 1 to 36500 days")):
        call_command("purge_notifications", "--days", days)


def test_a_retention_beyond_a_hundred_years_is_refused_not_an_overflow(now):
    with pytest.raises(ValueError, match="retention of 99999999 days: at most 36500"):
        retention.purge(now=now, days=99_999_999)


EMBEDDED = """
import io, json
from datetime import timedelta
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from backend.notifications import retention
from backend.notifications.receipts import apply as receipts
from backend.notifications.models import ApiClient, Notification

call_command("demo_data", stdout=io.StringIO())
key = ApiClient.issue("orders")[1]
ids = []
for n in range(3):
    body = {"user_id": "u-ar-1", "kind": "shipped", "params": {"order": str(n)}}
    answer = Client(SERVER_NAME="localhost").post("/api/v1/notifications", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {key}", HTTP_IDEMPOTENCY_KEY=f"order-{n}")
    ids.append(answer.json()["id"])
now = timezone.now()
Notification.objects.filter(pk=ids[0]).update(state="sent", updated_at=now - timedelta(days=91))
Notification.objects.filter(pk=ids[1]).update(state="sent", updated_at=now - timedelta(days=89))
done = retention.purge(now=now, days=90, pause=0)
left = sorted(str(pk) for pk in Notification.objects.values_list("pk", flat=True))
print("RESULT" + json.dumps({"deleted": done.deleted, "left": left, "ids": ids}))
"""


def test_the_embedded_default_sqlite_purges_by_rowid_slices(tmp_path):
    result = processes.run_embedded(tmp_path, EMBEDDED)

    assert result["deleted"] == 1
    assert result["left"] == sorted(result["ids"][1:])
