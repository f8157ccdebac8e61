"""The ledger (campaigns/ledger.py): exact against what the stub providers received; its CSV; remainder, correction."""

import csv
import io
import re
from datetime import time, timedelta

import pytest
from django.http import StreamingHttpResponse
from django.utils import timezone

from backend.notifications.models import Category, Kind, Notification, Receipt, Recipient, State, TemplateVersion
from backend.notifications.receipts.apply import ProviderReceipt, apply
from campaigns import actions, fanout, ledger
from campaigns.models import Campaign, CampaignAudit, Origin, ScheduleMode
from tests.campaigns_setup import approved_and_started, cancelled_mid_run, list_segment
from tests.processes import Processes, wait_until, worker_env
from tests.providers_setup import write_providers_file

AUDIENCE = 40


def phone(n: int) -> str:
    return f"+1555010{n:04d}"


@pytest.fixture
def sms_audience(demo_data) -> list[str]:
    Recipient.objects.bulk_create(
        Recipient(user_id=f"lg-{n:02d}", phone=phone(n), email=f"lg{n}@example.com", language="en")
        for n in range(AUDIENCE)
    )
    return [f"lg-{n:02d}" for n in range(AUDIENCE)]


@pytest.mark.django_db(transaction=True)
def test_a_cancel_mid_run_leaves_a_ledger_whose_sent_count_is_what_the_stubs_received(
    sms_audience, marketer, approver, provider_stub, smtp_sink, tmp_path
):
    providers = write_providers_file(tmp_path / "providers.toml", provider_stub.url, twilio={"rate": 10})
    provider_stub.state.faults = {"twilio": {"latency_ms": 50}}
    campaign = approved_and_started(
        marketer, approver, kind=Kind.objects.get(name="shipped"), channel="sms", params={"order": "77"},
        segment=list_segment(sms_audience, name="SMS audience"),
    )  # fmt: skip
    fanout.fan_out(campaign.pk)
    assert fanout.feed(limit=AUDIENCE) == AUDIENCE

    processes = Processes(worker_env(smtp_sink.port, NOTIFY_PROVIDERS_FILE=str(providers)))
    try:
        processes.start("run_worker", "standard")
        wait_until(lambda: len(provider_stub.state.messages) >= 5, 30, "five messages handed over")
        actions.cancel(campaign, approver)
        received_at_cancel = len(provider_stub.state.messages)
        wait_until(lambda: ledger.counts(campaign)[State.SENDING] == 0, 30, "the rows in flight to end")
    finally:
        processes.stop_all()

    split = ledger.ledger(Campaign.objects.get(pk=campaign.pk)).cancel
    received = provider_stub.state.messages
    sent_rows = Notification.objects.filter(campaign=campaign, state=State.SENT)
    assert split.sent == len(received) == sent_rows.count()
    assert sorted(m["to"] for m in received) == sorted(sent_rows.values_list("recipient__phone", flat=True))
    assert split.sent + split.cancelled == AUDIENCE  # no failure: each recipient either received it or was stopped
    assert 5 <= split.sent < AUDIENCE and split.cancelled > 0
    # What reached a provider after the cancel is at most what was in flight then, and was counted as such.
    assert len(received) - received_at_cancel <= split.in_flight
    assert split.sent == split.sent_at_cancel + split.in_flight_outcome["sent"]
    assert split.in_flight_outcome["still_in_flight"] == 0


@pytest.fixture
def finished(demo_data, marketer, approver) -> Campaign:
    return cancelled_mid_run(marketer, approver)


def test_the_ledger_of_a_campaign_not_cancelled_has_counts_only(sms_audience, marketer, approver):
    campaign = approved_and_started(marketer, approver, segment=list_segment(sms_audience[:3]))
    fanout.fan_out(campaign.pk)

    book = ledger.ledger(campaign)
    assert (book.cancel, book.total, book.counts[State.QUEUED]) == (None, 3, 3)


def test_the_api_gives_the_counts_and_the_ledger(finished, api, orders_service):
    Campaign.objects.filter(pk=finished.pk).update(client=orders_service[0])

    body = api.get(f"/api/v1/campaigns/{finished.pk}").json()

    assert body["counts"] == {
        "queued": 0, "scheduled": 0, "sending": 1, "sent": 1, "failed": 0, "suppressed": 0, "expired": 0,
        "cancelled": 1, "delivered": 0, "undelivered": 0,
    }  # fmt: skip
    assert body["ledger"] == {
        "cancelled_at": finished.cancelled_at.isoformat().replace("+00:00", "Z"),
        "cancelled_by": "marketer",
        "sent": 1,
        "sent_at_cancel": 1,
        "cancelled": 1,
        "in_flight_at_cancel": 1,
        "in_flight_outcome": {"sent": 0, "failed": 0, "expired": 0, "cancelled": 0, "still_in_flight": 1},
    }


def test_the_csv_streams_every_row_with_masked_contacts_and_no_params(finished, client, approver):
    Recipient.objects.filter(user_id="u-fa-1").update(user_id="=cmd|u-fa-1")  # a spreadsheet formula as a user id
    client.force_login(approver)

    response = client.get(f"/campaigns/{finished.pk}/ledger.csv")

    assert isinstance(response, StreamingHttpResponse) and response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith(f'attachment; filename="campaign-{finished.pk}-ledger-')
    with pytest.warns(Warning, match="asynchronous iterators"):  # daphne streams it; the test client collects it
        text = b"".join(response).decode()
    assert text.startswith('\ufeff"user_id",')  # the BOM Excel needs to read UTF-8; every cell quoted
    # In the order of the keys, campaign:<id>:<user id at fan-out>.
    rows = list(csv.reader(io.StringIO(text.removeprefix("\ufeff"))))
    sent_at = Notification.objects.get(campaign=finished, state=State.SENT).sent_at
    assert rows == [
        ["user_id", "address", "state", "reason", "provider", "sent_at"],
        ["u-ar-1", "l•••@example.com", "sent", "", "smtp", sent_at.isoformat().replace("+00:00", "Z")],
        ["u-en-1", "s•••@example.com", "sending", "", "", ""],
        ["'=cmd|u-fa-1", "d•••@example.com", "cancelled", "campaign-cancelled", "", ""],
    ]


def test_the_csv_pages_through_the_rows_by_key(finished):
    first = ledger.rows(finished, "", limit=2)
    rest = ledger.rows(finished, first[-1][0], limit=2)
    assert [row[1] for row in first + rest] == ["u-ar-1", "u-en-1", "u-fa-1"]


def test_resend_to_the_remainder_drafts_exactly_the_cancelled_recipients(finished, marketer):
    draft = actions.resend_remainder(finished, marketer)

    assert (draft.state, draft.content_hash, draft.origin_id, draft.origin_purpose) == (
        Campaign.State.DRAFT, "", finished.pk, Origin.REMAINDER,
    )  # fmt: skip
    assert list(draft.segment.members.values_list("user_id", flat=True)) == ["u-fa-1"]
    assert (draft.kind, draft.channel, draft.params, draft.template_versions) == (
        finished.kind, finished.channel, finished.params, finished.template_versions,
    )  # fmt: skip
    assert (draft.schedule_mode, draft.send_at) == (ScheduleMode.NOW, None)  # the original's instant has passed
    audit = CampaignAudit.objects.get(campaign=finished, action="resend")
    assert (audit.actor_name, audit.detail) == ("marketer", {"draft": draft.pk, "recipients": 1})
    with pytest.raises(actions.CampaignRefused, match="approve"):
        actions.approve(draft, marketer, draft.content_hash)  # a draft: it needs its own submit and approval


PACING = ("rate_per_second", "spread_seconds", "spread_until", "sending_hours_start", "sending_hours_end")
DAY = timedelta(days=1)


@pytest.mark.parametrize(
    ("pace", "expected"),
    [
        pytest.param({"rate_per_second": 0.1, "sending_hours_start": time(9), "sending_hours_end": time(21)},
                     None, id="rate-and-sending-hours"),
        pytest.param({"spread_seconds": 3600}, None, id="spread-over-an-hour"),
        pytest.param({"spread_until": DAY}, None, id="spread-until-tomorrow"),
        pytest.param({"spread_until": -DAY}, {"spread_until": None}, id="spread-until-yesterday-is-no-pace"),
    ],
)  # fmt: skip
def test_a_remainder_and_a_correction_keep_the_approved_pace(finished, marketer, pace, expected):
    # Approved with its content (content_hash): neither may go out faster, or at hours nobody approved.
    now = timezone.now()
    pace = {name: now + value if isinstance(value, timedelta) else value for name, value in pace.items()}
    Campaign.objects.filter(pk=finished.pk).update(**pace)
    finished.refresh_from_db()
    wanted = {name: None for name in PACING} | pace | (expected or {})

    for draft in (actions.resend_remainder(finished, marketer), actions.draft_correction(finished, marketer)):
        draft.refresh_from_db()
        assert {name: getattr(draft, name) for name in PACING} == wanted, draft.origin_purpose


def test_a_second_remainder_or_correction_is_refused_while_the_first_is_alive(finished, marketer):
    remainder, correction = actions.resend_remainder(finished, marketer), actions.draft_correction(finished, marketer)

    with pytest.raises(actions.CampaignRefused) as refused:
        actions.resend_remainder(finished, marketer)
    assert refused.value.message == (
        f"{remainder} already resends the remainder of {finished} (draft): continue with it, or cancel it first."
    )
    with pytest.raises(actions.CampaignRefused, match=re.escape(f"{correction} already corrects")):
        actions.draft_correction(finished, marketer)
    assert Campaign.objects.filter(origin=finished).count() == 2  # nothing half-made: no third draft, no segment

    actions.cancel(remainder, marketer)  # a cancelled remainder may be made again
    assert actions.resend_remainder(finished, marketer).origin_id == finished.pk


def test_a_campaign_not_cancelled_has_no_remainder(sms_audience, marketer, approver):
    campaign = approved_and_started(marketer, approver, segment=list_segment(sms_audience[:3]))
    with pytest.raises(actions.CampaignRefused, match="only a cancelled campaign has a remainder"):
        actions.resend_remainder(campaign, marketer)
    with pytest.raises(actions.PermissionRefused, match="approver may not create campaigns"):
        actions.resend_remainder(campaign, approver)


def test_a_correction_goes_to_exactly_those_who_were_sent_the_original(finished, marketer):
    draft = actions.draft_correction(finished, marketer)

    version = finished.correction_version
    assert (draft.origin_id, draft.origin_purpose, draft.state) == (finished.pk, Origin.CORRECTION, "draft")
    assert list(draft.segment.members.values_list("user_id", flat=True)) == ["u-ar-1"]
    assert (draft.kind, draft.channel, draft.template_versions, draft.params) == (
        version.kind, version.channel, {"en": version.pk}, {"percent": "20"},
    )  # fmt: skip
    assert draft.correction_version is None and f"corrects campaign {finished.pk}" in draft.correction_none_reason
    audit = CampaignAudit.objects.get(campaign=finished, action="correct")
    assert audit.detail == {"draft": draft.pk, "recipients": 1}


def test_a_correction_of_a_kind_of_its_own_sends_its_text_in_every_language_it_has(demo_data, marketer, approver):
    """A promo_fix kind holds correction texts in Arabic, Persian and English: each recipient gets their own."""
    fix = Kind.objects.create(
        name="promo_fix", category=Category.MARKETING, channels=["email"], opt_out_allowed=True, default_language="en"
    )
    versions = {
        language: TemplateVersion.objects.create(
            kind=fix, language=language, channel="email", subject="Correction", text_body=f"fix-{language}",
            status=TemplateVersion.Status.APPROVED,
        ).pk
        for language in ("ar", "fa", "en")
    }  # fmt: skip
    Campaign.objects.filter(pk=cancelled_mid_run(marketer, approver).pk).update(correction_version=versions["ar"])
    finished = Campaign.objects.get(origin__isnull=True, kind__name="promo")
    draft = actions.draft_correction(finished, marketer)
    assert (draft.kind, draft.template_versions) == (fix, versions)


def test_a_correction_of_the_campaigns_own_kind_sends_that_version_alone(finished, marketer, client):
    """The kind's other versions may be the very message being corrected: never filled in, not even by the composer."""
    draft = actions.draft_correction(finished, marketer)
    assert draft.template_versions == {"en": finished.correction_version_id}
    client.force_login(marketer)
    page = client.get(f"/campaigns/{draft.pk}/edit").content.decode()
    assert re.findall(r'<select name="template_(\w+)">', page) == ["en"]


def test_a_correction_is_refused_when_the_campaign_said_none_or_is_not_over(sms_audience, marketer, approver):
    campaign = approved_and_started(marketer, approver, segment=list_segment(sms_audience[:3]))
    with pytest.raises(actions.CampaignRefused, match="correct it once it is done or cancelled"):
        actions.draft_correction(campaign, marketer)
    actions.cancel(campaign, marketer)
    with pytest.raises(actions.CampaignRefused) as refused:
        actions.draft_correction(campaign, marketer)
    assert refused.value.message == (
        f"{campaign} has no correction template: it said none "
        "('A price correction would go out as a new campaign.'). Compose a new campaign instead."
    )


def test_a_remainder_of_a_remainder_keeps_one_suffix_and_fits_its_column(finished, marketer):
    Campaign.objects.filter(pk=finished.pk).update(name="x" * 195)
    finished.refresh_from_db()
    first = actions.resend_remainder(finished, marketer)
    assert (len(first.name), first.name[-12:], first.segment.name) == (200, " (remainder)", first.name)

    Campaign.objects.filter(pk=first.pk).update(state=Campaign.State.CANCELLED)
    first.refresh_from_db()
    assert actions._derived_name(first, " (remainder)") == first.name


def test_a_delivered_row_still_counts_as_sent_and_still_gets_the_correction(finished, marketer):
    """A delivery receipt moves a row on from ``sent`` (receipts/apply.py): the ledger and the correction follow it."""
    row = Notification.objects.get(campaign=finished, recipient__user_id="u-ar-1")
    Notification.objects.filter(pk=row.pk).update(provider_ref="ref-1")
    assert apply(["smtp"], ProviderReceipt("ref-1", "delivered", Receipt.Outcome.DELIVERED)) == "moved"

    book = ledger.ledger(finished)
    assert (book.counts[State.DELIVERED], book.cancel.sent_at_cancel, book.cancel.sent) == (1, 1, 1)
    assert book.cancel.in_flight_outcome[State.SENT] == 0
    draft = actions.draft_correction(finished, marketer)
    assert list(draft.segment.members.values_list("user_id", flat=True)) == ["u-ar-1"]
