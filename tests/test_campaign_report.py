"""The PDF report of a campaign (campaigns/report.py), from the staff page and the API, read back with pdftotext."""

import re
import subprocess
from decimal import Decimal

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from backend.notifications import masking
from backend.notifications.models import ApiClient, Attempt, Kind, Notification, Recipient, State, TemplateVersion
from campaigns import actions, fanout, pdf, report
from campaigns.models import Campaign
from tests.campaigns_setup import submitted

pytestmark = pytest.mark.usefixtures("demo_data")

# The demo's Arabic SMS template of "shipped" is "تم شحن طلبك رقم {{ order }}."; the Persian one is made here.
PERSIAN = "سفارش شما به شماره {{ order }} ارسال شد."
ARABIC_WORDS = ["تم", "شحن", "طلبك", "رقم"]
PERSIAN_WORDS = ["سفارش", "شما", "به", "شماره", "ارسال", "شد"]
# Who gets it: (user id, phone, language). The last has no phone: the fan-out suppresses it (no-address).
AUDIENCE = [
    ("u-ar-1", "+966501234567", "ar"),
    ("rep-ar-2", "+966501234568", "ar"),
    ("rep-ar-3", "+966501234569", "ar"),
    ("rep-ar-4", "+966501234570", "ar"),
    ("u-fa-1", "+989121234567", "fa"),
    ("rep-fa-2", "+989121234568", "fa"),
    ("u-en-1", "+14155550123", "en"),
    ("rep-en-2", "", "en"),
]
# What the providers did, per user: (state, provider, price of the one segment sent, from sms_prices.csv).
DELIVERED = {
    "u-ar-1": (State.SENT, "twilio", "0.0450"),
    "rep-ar-2": (State.SENT, "twilio", "0.0450"),
    "rep-ar-3": (State.SENT, "twilio", "0.0450"),
    "rep-ar-4": (State.FAILED, "twilio", None),
    "u-fa-1": (State.SENT, "vonage", "0.0950"),
    "rep-fa-2": (State.SENT, "vonage", "0.0950"),
    "u-en-1": (State.SENT, "twilio", "0.0079"),
}
PREFLIGHT = {
    "computed_at": "2026-12-01T09:00:00Z",
    "audience": 8,
    "stopped": {"no-address": 1},
    "will_send": 7,
    "languages": {"ar": 4, "fa": 2, "en": 1},
    "waves": [{"at": "2026-12-01T09:00:00Z", "utc_offset": "", "when": "now", "zones": ["UTC"], "size": 7}],
    "sms": {
        "currency": "USD",
        "per_language": [{"language": "ar", "encoding": "UCS-2", "segments": 1, "recipients": 4}],
        "per_country": [
            {"country": "SA", "recipients": 4, "segments": 4, "price_per_segment": "0.0450", "cost": "0.1800"},
            {"country": "IR", "recipients": 2, "segments": 2, "price_per_segment": "0.0950", "cost": "0.1900"},
            {"country": "US", "recipients": 1, "segments": 1, "price_per_segment": "0.0079", "cost": "0.0079"},
        ],
        "total": "0.3779",
        "worst_case_total": "0.7558",
    },
    "budget_per_second": 5000,
    "duration_seconds": 0.0014,
}
# Bidi controls pdftotext puts around runs of one direction (LRE, RLE, PDF, LRO, RLO, isolates, marks).
BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def pdf_text(pdf: bytes) -> str:
    """The text of ``pdf`` as pdftotext (poppler) reads it, table rows kept on one line, bidi controls removed."""
    assert pdf.startswith(b"%PDF-"), pdf[:200]
    done = subprocess.run(["pdftotext", "-layout", "-", "-"], input=pdf, capture_output=True, check=True)
    return BIDI_CONTROLS.sub("", done.stdout.decode())


@pytest.fixture
def orders(orders_service) -> ApiClient:
    return orders_service[0]


@pytest.fixture
def campaign(orders, marketer, approver) -> Campaign:
    """An Arabic, Persian and English SMS campaign made over the API, approved, fanned out and delivered."""
    shipped = Kind.objects.get(name="shipped")
    TemplateVersion.objects.create(  # newer than the demo's own Persian v1: its words are what the PDF shows
        kind=shipped, language="fa", channel="sms", version=2, text_body=PERSIAN,
        status=TemplateVersion.Status.APPROVED, approved_at=timezone.now(),
    )  # fmt: skip
    for user_id, phone, language in AUDIENCE:
        Recipient.objects.update_or_create(user_id=user_id, defaults={"phone": phone, "language": language})
    draft = actions.create_draft(
        orders, name="Shipping notice", kind=shipped, channel="sms", params={"order": "5012"},
        user_ids=[user_id for user_id, _, _ in AUDIENCE], correction_none_reason="Followed up by hand.",
    ).campaign  # fmt: skip
    campaign = actions.submit(draft, marketer)
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    Campaign.objects.filter(pk=campaign.pk).update(preflight=PREFLIGHT)
    assert actions.start(campaign)
    assert fanout.fan_out(campaign.pk).complete
    deliver(campaign)
    return Campaign.objects.get(pk=campaign.pk)


def deliver(campaign: Campaign) -> None:
    """Put each notification in its ``DELIVERED`` state, with the attempt a provider call would have left."""
    now = timezone.now()
    for notification in Notification.objects.filter(campaign=campaign).select_related("recipient"):
        if notification.recipient.user_id not in DELIVERED:
            continue
        state, provider, price = DELIVERED[notification.recipient.user_id]
        Notification.objects.filter(pk=notification.pk).update(state=state, provider=provider, attempt_count=1)
        Attempt.objects.create(
            notification=notification, number=1, provider=provider, started_at=now, sms_encoding="UCS-2",
            sms_segments=1, result=Attempt.Result.SENT if price else Attempt.Result.PERMANENT,
            cost=Decimal(price) if price else None, currency="USD" if price else "",
        )  # fmt: skip


@pytest.fixture
def staff_pdf_bytes(client, marketer, campaign) -> bytes:
    client.force_login(marketer)
    response = client.get(f"/campaigns/{campaign.pk}/report.pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'attachment; filename="campaign-{campaign.pk}-report.pdf"'
    return response.content


@pytest.fixture
def staff_pdf(staff_pdf_bytes) -> str:
    return pdf_text(staff_pdf_bytes)


def test_every_glyph_comes_from_the_embedded_dejavu_file(staff_pdf_bytes, tmp_path):
    path = tmp_path / "report.pdf"
    path.write_bytes(staff_pdf_bytes)
    fonts = subprocess.run(["pdffonts", str(path)], capture_output=True, check=True, text=True).stdout
    # name, type, encoding, emb, sub, uni, object. "Report Sans" is the @font-face of DejaVuSans.ttf: a
    # file that failed to load would leave a fallback font of fontconfig's choice here instead.
    rows = [line.split() for line in fonts.splitlines()[2:]]
    assert {re.sub(r"^[A-Z]{6}\+", "", row[0]) for row in rows} == {"Report-Sans", "Report-Sans-Bold"}
    assert all(row[-5:-2] == ["yes", "yes", "yes"] for row in rows), fonts


def test_it_holds_the_arabic_and_persian_bodies_in_logical_order(staff_pdf):
    # pdftotext gives right-to-left runs in logical order; the LTR order number may land on either side.
    assert " ".join(ARABIC_WORDS) in staff_pdf
    assert " ".join(PERSIAN_WORDS[:4]) in staff_pdf and " ".join(PERSIAN_WORDS[4:]) in staff_pdf
    assert "Your order 5012 has shipped." in staff_pdf


def test_it_names_the_composer_submitter_and_approver_with_the_hash(staff_pdf, campaign):
    assert re.search(r"Composed by\s+api:orders, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", staff_pdf)
    assert re.search(r"Submitted by\s+marketer, ", staff_pdf)
    assert re.search(r"Approved by\s+approver, ", staff_pdf)
    assert re.search(rf"On content hash\s+{campaign.content_hash}", staff_pdf)


def test_it_counts_the_outcome_per_state_and_per_channel_and_provider(staff_pdf):
    counts = dict(re.findall(r"^\s*(Queued|Scheduled|Sending|Sent|Failed|Suppressed|Expired|Cancelled)\s+(\d+)$",
                             staff_pdf, re.M))  # fmt: skip
    assert counts == {
        "Queued": "0", "Scheduled": "0", "Sending": "0", "Sent": "6", "Failed": "1", "Suppressed": "1",
        "Expired": "0", "Cancelled": "0",
    }  # fmt: skip
    rows = re.findall(r"^\s*(sent|failed|suppressed)\s+(sms)\s+(twilio|vonage|none \(not handed over\))\s+(\d+)$",
                      staff_pdf, re.M)  # fmt: skip
    assert rows == [
        ("sent", "sms", "twilio", "4"),
        ("sent", "sms", "vonage", "2"),
        ("failed", "sms", "twilio", "1"),
        ("suppressed", "sms", "none (not handed over)", "1"),
    ]
    assert "8 notifications made." in staff_pdf


def test_it_shows_the_frozen_estimate_and_the_actual_cost(staff_pdf):
    assert re.search(r"Estimated total\s+0.3779 USD", staff_pdf)
    assert re.search(r"Worst case\s+0.7558 USD", staff_pdf)
    assert re.search(r"SA\s+4\s+4\s+0.0450\s+0.1800", staff_pdf)
    # 3 × 0.0450 (SA) + 0.0079 (US) by twilio; 2 × 0.0950 (IR) by vonage; the failed attempt costs nothing.
    assert re.search(r"twilio\s+4\s+4\s+0.1429 USD", staff_pdf)
    assert re.search(r"vonage\s+2\s+2\s+0.1900 USD", staff_pdf)


def test_it_shows_the_audience_waves_and_timeline(staff_pdf, campaign):
    assert re.search(r"Segment\s+Shipping notice \(list\) \(uploaded list of users\)", staff_pdf)
    assert re.search(r"Size at submit\s+8", staff_pdf)
    assert re.search(r"Stopped by policy\s+no-address 1", staff_pdf)
    # Sent as soon as approved: the instant is the pre-flight's, not the start (the timeline has that).
    wave = r"as soon as approved \(pre-flight at 2026-12-01 09:00:00\)\s+every zone at once\s+UTC\s+7"
    assert re.search(wave, staff_pdf)
    timeline = re.findall(
        r"^\s*\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+(\S+)\s+([A-Z][a-z]+)\s+(—|[0-9a-f]{12})", staff_pdf, re.M
    )
    short = campaign.content_hash[:12]
    assert timeline == [
        ("api:orders", "Created", "—"),
        ("marketer", "Submitted", short),
        ("approver", "Approved", short),
        ("scheduler", "Started", short),
    ]


def test_the_api_gives_the_same_report_to_the_client_that_made_it(api, campaign, staff_pdf):
    response = api.get(f"/api/v1/campaigns/{campaign.pk}/report.pdf", HTTP_ACCEPT="application/pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    text = pdf_text(response.content)
    for word in ARABIC_WORDS + PERSIAN_WORDS + ["approver"]:
        assert word in text


def test_another_api_client_gets_404_in_json_even_asking_for_pdf(campaign):
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiClient.issue('billing')[1]}")
    response = other.get(f"/api/v1/campaigns/{campaign.pk}/report.pdf", HTTP_ACCEPT="application/pdf")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["message"] == f"No campaign with id {campaign.pk}."


def test_without_a_key_the_api_answers_401_in_json(client, campaign):
    response = client.get(f"/api/v1/campaigns/{campaign.pk}/report.pdf")
    assert (response.status_code, response["Content-Type"]) == (401, "application/json")


def test_a_client_that_accepts_only_json_is_told_it_is_a_pdf(api, campaign):
    response = api.get(f"/api/v1/campaigns/{campaign.pk}/report.pdf", HTTP_ACCEPT="application/json")
    assert (response.status_code, response["Content-Type"]) == (406, "application/json")
    assert response.json()["error"] == "not_acceptable"


@pytest.mark.parametrize("persona", ["marketer", "approver", "outsider"])
def test_marketers_approvers_and_support_agents_may_read_it(request, client, persona, campaign):
    client.force_login(request.getfixturevalue(persona))  # "outsider" is the support agent
    assert client.get(f"/campaigns/{campaign.pk}/report.pdf").status_code == 200


def test_other_staff_get_403_and_anonymous_visitors_the_login_page(client, editor, campaign):
    url = f"/campaigns/{campaign.pk}/report.pdf"
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    client.force_login(editor)
    assert client.get(url).status_code == 403


def test_an_unknown_campaign_is_404(client, marketer):
    client.force_login(marketer)
    assert client.get("/campaigns/999999/report.pdf").status_code == 404


def test_a_campaign_without_a_pre_flight_says_not_recorded(client, marketer):
    campaign = submitted(marketer)
    # As campaigns submitted before the pre-flight existed were stored (migration 0003's default).
    Campaign.objects.filter(pk=campaign.pk).update(preflight={})
    client.force_login(marketer)
    text = pdf_text(client.get(f"/campaigns/{campaign.pk}/report.pdf").content)
    assert "Waves: not recorded" in text
    assert re.search(r"Size at submit\s+3", text)  # the submit's own count
    assert "Only SMS is priced; this campaign sends by Email." in text
    assert "خصم" in text  # the demo's Arabic promo email


def test_secret_params_are_masked_in_the_content(campaign):
    shipped = Kind.objects.get(name="shipped")
    shipped.params["order"]["secret"] = True
    shipped.save()
    campaign.refresh_from_db()
    texts = [content.text for content in report.gather(campaign).contents]
    assert texts and all(masking.MASK in text and "5012" not in text for text in texts)


def test_gathering_takes_the_same_queries_however_many_notifications(campaign, django_assert_num_queries):
    campaign = report.CAMPAIGNS.get(pk=campaign.pk)
    with django_assert_num_queries(5):  # audit, approvals, template versions, outcome, SMS cost
        report.gather(campaign)
    # 40 more notifications of the campaign, expired: the queries stay the same, only the counts grow.
    Recipient.objects.bulk_create(Recipient(user_id=f"rep-more-{n}", phone="+966501230000") for n in range(40))
    more = Notification.objects.filter(campaign=campaign).first()
    Notification.objects.bulk_create(
        Notification(
            idempotency_key=f"more-{n}",
            idempotency_scope=f"campaign:{campaign.pk}",
            recipient=recipient,
            kind=more.kind,
            channel="sms",
            priority=more.priority,
            state=State.EXPIRED,
            campaign=campaign,
        )
        for n, recipient in enumerate(Recipient.objects.filter(user_id__startswith="rep-more-"))
    )
    with django_assert_num_queries(5):
        gathered = report.gather(campaign)
    assert (gathered.total, dict((state, n) for state, _, n in gathered.by_state)["expired"]) == (48, 40)


def test_the_report_loads_nothing_but_its_fonts():
    fetcher = pdf.FontsOnly(report.FONTS.values())
    with pytest.raises(pdf.FetchRefused, match="only its fonts"):
        fetcher.fetch("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(pdf.FetchRefused, match="only its fonts"):
        fetcher.fetch("file:///etc/passwd")
    assert fetcher.fetch(f"file://{report.FONTS['regular']}").read(4) == b"\x00\x01\x00\x00"  # a TrueType file


@pytest.mark.parametrize(
    ("text", "direction"),
    [
        ("إشعار شحن — SMS عربي", "rtl"),
        ("SMS عربي", "ltr"),
        ("«٢٠٪» تخفيض", "rtl"),  # punctuation and Arabic-Indic digits are weak: the first letter decides
        ("2026 — سفارش", "rtl"),
        ("", "ltr"),
        ("שלום", "rtl"),  # Hebrew: R, not AL
    ],
)
def test_a_name_takes_the_direction_of_its_first_strong_character(text, direction):
    assert report.first_strong_direction(text) == direction


@pytest.mark.parametrize(
    ("detail", "line"),
    [
        pytest.param({"fields": ["channel", "end_at"]}, "fields: channel, end_at", id="a-list-reads-as-words"),
        pytest.param({"audience": 63, "templates": {"ar": 22, "en": 21}}, "audience: 63; templates: ar 22, en 21",
                     id="an-object-of-plain-values"),
        pytest.param({"from_state": "running", "counts": {"sent": 6}}, "from state: running; counts: sent 6",
                     id="keys-without-underscores"),
        pytest.param({"waves": [{"at": "09:00", "size": 2}]}, 'waves: [{"at": "09:00", "size": 2}]',
                     id="deeper-stays-json"),
    ],
)  # fmt: skip
def test_an_audit_rows_detail_reads_as_a_line_of_text(detail, line):
    assert report._detail(detail) == line
