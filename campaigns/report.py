"""A campaign's PDF report: who composed and approved it, what it said, to whom, what happened and what it cost.

``gather`` reads everything in a fixed, small number of queries whatever the audience size:
the outcome is one ``GROUP BY`` (state, channel, provider) over the campaign's notifications
(index ``notification_campaign_idx``) and the SMS cost one ``SUM`` over their sent attempts,
so a million-recipient campaign is aggregated in PostgreSQL, never iterated in Python.
``render_pdf`` lays it out with WeasyPrint (``campaigns/templates/campaigns/report.html``, ``pdf.py``),
which may load the font files and nothing else.

The content is each language's template version rendered with the campaign's shared params,
secret ones masked (``masking.masked_params``). Arabic and Persian blocks carry ``dir="rtl"``
and are set in DejaVu Sans, embedded from the system's font file (``fonts-dejavu-core``,
installed by bin/test and deploy/Dockerfile): a font without Arabic glyphs prints boxes.
"""

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, Sum
from django.http import HttpResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.cache import add_never_cache_headers

from backend.notifications import bidi, masking, rendering
from backend.notifications.locales import text_direction
from backend.notifications.models import Attempt, Channel, Notification, State, TemplateVersion
from backend.notifications.pricing import decimal_str
from campaigns import pacing
from campaigns.models import Campaign, CampaignApproval, CampaignAudit

# DejaVu Sans covers Latin, Arabic and Persian; Debian's fonts-dejavu-core puts it here.
FONT_DIR = "/usr/share/fonts/truetype/dejavu/"
FONTS = {"regular": FONT_DIR + "DejaVuSans.ttf", "bold": FONT_DIR + "DejaVuSans-Bold.ttf"}
# A campaign as ``gather`` reads it without further queries.
CAMPAIGNS = Campaign.objects.select_related("kind", "segment", "author", "client")
# Money in the report, as in the pre-flight: a decimal string with 4 places.
CENTS = Decimal("0.0001")
# The longest audit detail shown on one timeline line, in characters.
DETAIL_CHARS = 300


@dataclass(frozen=True)
class Content:
    """One language's message as it goes out: ``recipients`` from the pre-flight (None when not recorded)."""

    language: str
    direction: str  # "rtl" or "ltr"
    version: TemplateVersion | None
    subject: str
    text: str
    problem: str  # why it cannot be shown ("" when it can)
    recipients: int | None


@dataclass(frozen=True)
class OutcomeRow:
    """How many of the campaign's notifications are in ``state`` on ``channel`` by ``provider`` ("" before any)."""

    state: str
    channel: str
    provider: str
    count: int


@dataclass(frozen=True)
class SmsCost:
    """What sent SMS attempts by ``provider`` cost, summed in SQL from their priced attempt rows.

    ``currency`` is "" and ``amount`` None for attempts the price list had no price for.
    """

    provider: str
    currency: str
    messages: int
    segments: int
    amount: str | None


@dataclass(frozen=True)
class Report:
    """Everything the PDF shows, gathered by ``gather``; times are aware datetimes."""

    campaign: Campaign
    generated_at: datetime
    composed_by: str
    submitted_by: str
    decisions: list[CampaignApproval]
    contents: list[Content]
    audience_size: int | None
    param_names: list[str]
    stopped: list[tuple[str, int]]  # (reason, count) of the pre-flight
    will_send: int | None
    waves: list[dict[str, Any]] | None
    timeline: list[tuple[CampaignAudit, str]]
    by_state: list[tuple[str, str, int]]  # (state, label, count), every state in lifecycle order
    outcome: list[OutcomeRow]
    total: int
    estimate: dict[str, Any] | None
    actual: list[SmsCost] | None  # None unless the campaign sends SMS
    name_direction: str  # "rtl" or "ltr": of the campaign's name, by its first strong character
    segment_direction: str

    @property
    def pacing(self) -> str:
        """The campaign's spread, rate and sending hours in words (``pacing.describe``); "" without."""
        return pacing.describe(self.campaign)


def first_strong_direction(text: str) -> str:
    """ "rtl" when the first strongly directional character of ``text`` is right-to-left, else "ltr".

    The P2/P3 rule of the Unicode Bidirectional Algorithm (UAX #9 §3.3.1), which a browser applies to
    ``<bdi>`` and WeasyPrint does not: without it an Arabic name in the report read in the wrong order.
    """
    return bidi.first_strong(text) or "ltr"


def gather(campaign: Campaign) -> Report:
    """Read everything the report of ``campaign`` shows: a fixed number of queries, aggregated in SQL."""
    preflight = campaign.preflight or {}
    audit = list(CampaignAudit.objects.filter(campaign=campaign).order_by("at", "pk"))
    outcome = outcome_rows(campaign)
    counts: dict[str, int] = {}
    for row in outcome:
        counts[row.state] = counts.get(row.state, 0) + row.count
    return Report(
        campaign=campaign,
        generated_at=timezone.now(),
        composed_by=_composer(campaign),
        submitted_by=next((row.actor_name for row in reversed(audit) if row.action == CampaignAudit.Action.SUBMIT), ""),
        decisions=list(CampaignApproval.objects.filter(campaign=campaign).select_related("approver").order_by("at")),
        contents=_contents(campaign, preflight.get("languages") or {}),
        audience_size=preflight.get("audience", _submitted_audience(audit)),
        param_names=sorted(campaign.params),
        stopped=sorted((preflight.get("stopped") or {}).items()),
        will_send=preflight.get("will_send"),
        waves=_waves(preflight),
        timeline=[(row, _detail(row.detail)) for row in audit],
        by_state=[(state.value, state.label, counts.get(state.value, 0)) for state in State],
        outcome=outcome,
        total=sum(counts.values()),
        estimate=preflight.get("sms"),
        actual=sms_costs(campaign) if campaign.channel == Channel.SMS else None,
        name_direction=first_strong_direction(campaign.name),
        segment_direction=first_strong_direction(campaign.segment.name),
    )


def _composer(campaign: Campaign) -> str:
    if campaign.author_id:
        return campaign.author.get_username()
    return f"api:{campaign.client.name}" if campaign.client_id else "unknown"


def _submitted_audience(audit: list[CampaignAudit]) -> int | None:
    """The audience size counted at the last submit (its audit row), for a campaign without a pre-flight."""
    submits = [row for row in audit if row.action == CampaignAudit.Action.SUBMIT]
    return submits[-1].detail.get("audience") if submits else None


def _contents(campaign: Campaign, languages: dict[str, int]) -> list[Content]:
    """Each language's template version rendered with the shared params, secret ones masked."""
    ids = {language: int(pk) for language, pk in (campaign.template_versions or {}).items()}
    versions = TemplateVersion.objects.in_bulk(ids.values())
    params = masking.masked_params(campaign.kind, campaign.params)
    contents = []
    for language, pk in sorted(ids.items()):
        version, subject, text, problem = versions.get(pk), "", "", ""
        if version is None:
            problem = f"Template version {pk} no longer exists."
        else:
            try:
                rendered = rendering.render(version, params)
                subject, text = rendered.subject, rendered.text
            except rendering.RenderError as exc:
                problem = f"It does not render with the campaign's params: {exc}"
        contents.append(
            Content(language, text_direction(language), version, subject, text, problem, languages.get(language))
        )
    return contents


def _waves(preflight: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The frozen waves with ``at`` as a datetime; None for a campaign submitted before the pre-flight existed."""
    if "waves" not in preflight:
        return None
    return [{**wave, "at": datetime.fromisoformat(wave["at"])} for wave in preflight["waves"]]


def _detail(detail: dict[str, Any]) -> str:
    """An audit row's detail on one line, ``key: value; …``, cut at ``DETAIL_CHARS``.

    A list of plain values reads ``a, b``, an object of them ``ar 22, en 21``; anything deeper is JSON.
    """
    line = "; ".join(f"{key.replace('_', ' ')}: {_plain(value)}" for key, value in detail.items())
    return line if len(line) <= DETAIL_CHARS else line[: DETAIL_CHARS - 1] + "…"


def _plain(value: Any) -> str:
    scalar = str | int | float
    if isinstance(value, scalar):
        return str(value)
    if isinstance(value, list) and all(isinstance(item, scalar) for item in value):
        return ", ".join(str(item) for item in value)
    if isinstance(value, dict) and all(isinstance(item, scalar) for item in value.values()):
        return ", ".join(f"{key} {item}" for key, item in value.items())
    return json.dumps(value, ensure_ascii=False)


def outcome_rows(campaign: Campaign) -> list[OutcomeRow]:
    """The campaign's notifications counted per (state, channel, provider): one GROUP BY in SQL.

    Once archived (``campaigns/archive.py``) the rows frozen then: retention may have deleted the notifications.
    """
    if campaign.archived_at:
        return [OutcomeRow(*row) for row in campaign.archive.get("outcome", [])]
    grouped = (
        Notification.objects.filter(campaign=campaign)
        .order_by()
        .values_list("state", "channel", "provider")
        .annotate(count=Count("pk"))
    )
    order = {state: index for index, state in enumerate(State.values)}
    rows = [OutcomeRow(state, channel, provider, count) for state, channel, provider, count in grouped]
    return sorted(rows, key=lambda row: (order.get(row.state, len(order)), row.channel, row.provider))


def sms_costs(campaign: Campaign) -> list[SmsCost]:
    """The cost of the campaign's sent SMS: each sent attempt's price (segments × the price list, fixed at send
    time by ``dispatch.sms_cost``) summed per provider and currency in one query; once archived, the frozen sums."""
    if campaign.archived_at:
        return [SmsCost(*row) for row in campaign.archive.get("sms_cost", [])]
    grouped = (
        Attempt.objects.filter(notification__campaign=campaign, result=Attempt.Result.SENT)
        .order_by()
        .values_list("provider", "currency")
        .annotate(messages=Count("pk"), segments=Sum("sms_segments"), amount=Sum("cost"))
        .order_by("provider", "currency")
    )
    return [
        SmsCost(provider, currency, messages, segments or 0, _money(amount) if currency else None)
        for provider, currency, messages, segments, amount in grouped
    ]


def _money(amount: Decimal | None) -> str:
    return decimal_str((amount or Decimal(0)).quantize(CENTS))


# --- the PDF --------------------------------------------------------------------------------------


def render_pdf(campaign: Campaign) -> bytes:
    """The report of ``campaign`` as PDF bytes (A4, fonts embedded)."""
    from campaigns import pdf  # WeasyPrint: loaded by the first report, not by every process (pdf.py)

    html = render_to_string("campaigns/report.html", {"report": gather(campaign), "fonts": FONTS})
    return pdf.write_pdf(html, FONTS.values())


def pdf_response(campaign: Campaign) -> HttpResponse:
    """The report as a download, ``campaign-<id>-report.pdf``, never cached (it is private and changes as it runs)."""
    response = HttpResponse(render_pdf(campaign), content_type="application/pdf")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-report.pdf"'
    add_never_cache_headers(response)
    return response
