"""The running campaign's page: live progress, pause and resume, cancel, the ledger and its CSV, remainder and
correction drafts.

The fragment also shows the pace — sent per minute over the last hour as a small SVG bar plot
(``campaigns/pace.py``) — the expected end at the recent pace, and why the campaign waits when it
waits (paused, outside sending hours, its spread or rate, the standard queue full, a provider's
breaker open).

Marketers, approvers and support agents (``campaigns.view_campaign``) see it; anyone else
gets 403, anonymous visitors the login page. What a button does is decided by the action
(``campaigns/actions.py``: who may cancel, who may draft), never by the template; the
template only leaves out buttons the viewer could not use.

The progress fragment is polled by HTMX every ``POLL_SECONDS`` and stops polling once the
campaign is final (done, or cancelled with nothing left in flight). Each poll costs one
``GROUP BY state`` on the (campaign, state) index — plus one ``GROUP BY send_at, state`` for
a local-time campaign's waves — whatever the campaign's size. The ETA's recent rate needs
no stored history: each fragment carries its reference sample (when, how many sent) into
the next poll's URL.
"""

import csv
import io
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from backend.notifications.masking import mask_email, mask_phone
from backend.notifications.models import Channel, State
from backend.spreadsheet import BOM, QUOTING, spreadsheet_text
from campaigns import actions, ledger, pace, pacing
from campaigns.models import Campaign, Origin, ScheduleMode
from frontend.editor.views import _answer, staff_only

VIEW = "campaigns.view_campaign"
ADD = "campaigns.add_campaign"
POLL_SECONDS = 2
# The recent rate is measured over at least this long; an older reference sample is replaced.
RATE_WINDOW_SECONDS = 10.0
CSV_BATCH = 5000
# Rows shown per state, in the order a notification lives through them.
SHOWN_STATES = (
    State.QUEUED, State.SCHEDULED, State.SENDING, State.SENT, State.DELIVERED, State.UNDELIVERED, State.FAILED,
    State.SUPPRESSED, State.EXPIRED, State.CANCELLED,
)  # fmt: skip
# Handed to a provider or final, and counted towards "will send" (suppressed rows never were).
PROGRESSED = (
    State.SENDING, State.SENT, State.DELIVERED, State.UNDELIVERED, State.FAILED, State.EXPIRED, State.CANCELLED,
)  # fmt: skip
# Started: it has a pace (its plot and expected end) and may wait for something.
STARTED_STATES = {Campaign.State.RUNNING, Campaign.State.PAUSED, Campaign.State.DONE, Campaign.State.CANCELLED}
# The pace plot's size in SVG units (a bar per minute).
PLOT_WIDTH, PLOT_HEIGHT = 240, 48
LIVE_STATES = {Campaign.State.APPROVED, Campaign.State.SCHEDULED, Campaign.State.RUNNING, Campaign.State.PAUSED}


@dataclass(frozen=True)
class Wave:
    """A local-time wave: its send instant and its rows per state."""

    at: datetime | None
    counts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class Progress:
    """What the fragment shows: counts, the bar, the ETA, and the sample the next poll measures the rate from."""

    campaign: Campaign
    ledger: ledger.Ledger
    will_send: int
    done: int
    eta_seconds: float | None
    eta_source: str
    waves: list[Wave]
    sample_at: float
    sample_sent: int

    @property
    def percent(self) -> int:
        if self.campaign.state == Campaign.State.DONE:
            return 100
        return min(100, self.done * 100 // self.will_send) if self.will_send else 0

    @property
    def live(self) -> bool:
        """Keep polling: the campaign may still move, or rows in flight at a cancel have not ended."""
        if self.campaign.state in LIVE_STATES:
            return True
        return self.campaign.state == Campaign.State.CANCELLED and self.ledger.counts[State.SENDING] > 0

    @property
    def rows(self) -> list[tuple[str, str, int]]:
        return [(state, State(state).label, self.ledger.counts[state]) for state in SHOWN_STATES]


def _campaign(pk: int) -> Campaign:
    return get_object_or_404(Campaign.objects.select_related("kind", "segment", "author", "correction_version"), pk=pk)


def _will_send(campaign: Campaign, counts: dict[str, int]) -> int:
    """How many the campaign hands over in all: exact once fanned out, else the frozen pre-flight's figure."""
    made = sum(counts.values()) - counts[State.SUPPRESSED]
    if campaign.fanned_out_at or campaign.state in actions.FINAL_STATES:
        return made
    return max(made, int(campaign.preflight.get("will_send") or 0))


def _waves(campaign: Campaign) -> list[Wave]:
    """A local-time campaign's rows per send instant and state (one GROUP BY); none for other schedules."""
    if campaign.schedule_mode != ScheduleMode.LOCAL_TIME:
        return []
    return [Wave(at, {state: counts.get(state, 0) for state in SHOWN_STATES}) for at, counts in ledger.waves(campaign)]


def _sample(request: HttpRequest) -> tuple[float, int] | None:
    """The previous poll's reference sample (``at`` epoch seconds, ``sent``) from the URL; None if absent or bad."""
    try:
        return float(request.GET["at"]), int(request.GET["sent"])
    except (KeyError, ValueError):
        return None


def _eta(remaining: int, rate: float | None, budget: float | None) -> tuple[float | None, str]:
    """Seconds left at the recent sent rate, else at the standard tier's provider budget (the pre-flight's)."""
    if remaining <= 0:
        return 0.0, "done"
    if rate:
        return remaining / rate, "recent rate"
    if budget:
        return remaining / budget, "provider budget"
    return None, ""


def progress_of(campaign: Campaign, previous: tuple[float, int] | None, now: float | None = None) -> Progress:
    """``campaign``'s progress now; ``previous`` is the reference sample (epoch seconds, sent) of the last poll."""
    now = time.time() if now is None else now
    book = ledger.ledger(campaign)
    counts = book.counts
    will_send = _will_send(campaign, counts)
    done = sum(counts[state] for state in PROGRESSED)
    rate = None
    sample_at, sample_sent = now, ledger.handed_over(counts)
    if previous and now > previous[0]:
        elapsed, sent_since = now - previous[0], sample_sent - previous[1]
        rate = sent_since / elapsed if sent_since > 0 and elapsed >= 1 else None
        if elapsed < RATE_WINDOW_SECONDS:
            sample_at, sample_sent = previous
    live = campaign.state in LIVE_STATES
    eta, source = _eta(will_send - done, rate, campaign.preflight.get("budget_per_second")) if live else (None, "")
    return Progress(campaign, book, will_send, done, eta, source, _waves(campaign), sample_at, sample_sent)


@dataclass(frozen=True)
class Bar:
    """One minute of the pace plot as SVG: x, y and height in the plot's units, the label of its tooltip."""

    x: int
    y: float
    height: float
    label: str


def pace_bars(minutes: list[pace.Minute]) -> list[Bar]:
    """Bars of ``PLOT_WIDTH`` / ``len(minutes)`` units each, scaled so that the busiest minute fills ``PLOT_HEIGHT``."""
    width = PLOT_WIDTH // max(len(minutes), 1)
    top = max((minute.sent for minute in minutes), default=0) or 1
    bars = []
    for k, minute in enumerate(minutes):
        height = PLOT_HEIGHT * minute.sent / top
        bars.append(Bar(k * width, PLOT_HEIGHT - height, height, f"{minute.at:%H:%M} UTC: {minute.sent:,} sent"))
    return bars


def _context(request: HttpRequest, campaign: Campaign) -> dict:
    user = request.user
    progress = progress_of(campaign, _sample(request))
    split = progress.ledger.cancel
    final = campaign.state in actions.FINAL_STATES
    started = campaign.state in STARTED_STATES
    remaining = progress.will_send - progress.done
    # An archived campaign's rows are gone: no pace to draw (its page says why).
    facts = pace.facts(campaign) if started and not campaign.archived_at else None
    audit = list(campaign.audit.order_by("at", "pk"))
    now = timezone.now()
    going = (
        pace.pace(campaign, remaining, now, pace.earliest_end(facts, now), pace.resumed_at(audit)) if facts else None
    )
    return {
        "campaign": campaign,
        "progress": progress,
        "pace": going,
        "pace_bars": pace_bars(going.minutes) if going else [],
        "plot": {"width": PLOT_WIDTH, "height": PLOT_HEIGHT, "minutes": pace.PLOT_MINUTES},
        "waiting": pace.why_waiting(facts) if facts else [],
        "split": split,
        "poll_seconds": POLL_SECONDS,
        "eta": eta_text(progress.eta_seconds),
        "can_cancel": not final and actions.may_cancel(campaign, user),
        "can_pause": campaign.state == Campaign.State.RUNNING and actions.may_pause(campaign, user),
        "can_resume": campaign.state == Campaign.State.PAUSED and actions.may_pause(campaign, user),
        # Once made, a remainder or correction is linked under "Made from it" instead of offered again.
        "can_resend": bool(split and split.cancelled)
        and not campaign.archived_at
        and user.has_perm(ADD)
        and actions.existing_derived(campaign, Origin.REMAINDER) is None,
        "can_correct": final
        and not campaign.archived_at
        and sum(progress.ledger.counts[state] for state in ledger.REACHED) > 0
        and user.has_perm(ADD)
        and actions.existing_derived(campaign, Origin.CORRECTION) is None,
        "audit": audit,
    }


# --- the page and its fragment ----------------------------------------------------------------------------------------


@require_GET
@staff_only(VIEW)
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The campaign page: state, live progress, the ledger once cancelled, the buttons, the audit timeline."""
    campaign = _campaign(pk)
    context = {
        **_context(request, campaign),
        "derived": list(campaign.derived.order_by("pk")),
        "pacing": pacing.describe(campaign),
    }
    return _answer(render(request, "frontend/campaigns/detail.html", context))


@require_GET
@staff_only(VIEW)
def progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress fragment with the timeline (HTMX polling); it carries no trigger once the campaign is final."""
    return _answer(render(request, "frontend/campaigns/detail_progress.html", _context(request, _campaign(pk))))


# --- the actions ------------------------------------------------------------------------------------------------------


def _back(request: HttpRequest, campaign_id: int) -> HttpResponse:
    url = reverse("frontend:campaign", args=[campaign_id])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def _act(request: HttpRequest, pk: int, act, done: str) -> HttpResponse:
    """Run ``act(campaign, user)``; a refusal is a message on the page (403 when not allowed)."""
    campaign = _campaign(pk)
    try:
        result = act(campaign, request.user)
    except actions.PermissionRefused:
        raise PermissionDenied from None
    except actions.CampaignRefused as refused:
        messages.error(request, refused.message)
        return _back(request, campaign.pk)
    messages.success(request, done.format(campaign=result))
    return _back(request, result.pk)


@require_POST
@staff_only(VIEW)
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    """Cancel now (its author or an approver): nothing more is handed to a provider."""
    return _act(request, pk, actions.cancel, "Cancelled: nothing more is handed to a provider.")


@require_POST
@staff_only(VIEW)
def pause(request: HttpRequest, pk: int) -> HttpResponse:
    """Pause now (its author or an approver): nothing more is handed to a provider until it is resumed."""
    return _act(request, pk, actions.pause, "Paused: nothing more is handed to a provider until you resume it.")


@require_POST
@staff_only(VIEW)
def resume(request: HttpRequest, pk: int) -> HttpResponse:
    """Resume: the campaign continues with exactly the recipients not yet handed over."""
    return _act(request, pk, actions.resume, "Resumed: it continues with the recipients not yet handed over.")


@require_POST
@staff_only(ADD)
def resend(request: HttpRequest, pk: int) -> HttpResponse:
    """Draft a campaign to exactly the recipients the cancel stopped; it opens on its own page."""
    return _act(
        request, pk, actions.resend_remainder,
        "Drafted {campaign.name!s} to the remainder: it needs its own approval before it is sent.",
    )  # fmt: skip


@require_POST
@staff_only(ADD)
def correct(request: HttpRequest, pk: int) -> HttpResponse:
    """Draft the correction to exactly the recipients who were sent this campaign."""
    return _act(
        request, pk, actions.draft_correction,
        "Drafted {campaign.name!s} with the correction template: it needs its own approval before it is sent.",
    )  # fmt: skip


# --- the ledger as CSV ------------------------------------------------------------------------------------------------


def _address(channel: str, phone: str, email: str) -> str:
    return {Channel.SMS: mask_phone(phone), Channel.EMAIL: mask_email(email)}.get(channel, "")


def _csv_text(lines: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, quoting=QUOTING).writerows(lines)
    return out.getvalue()


async def _csv_chunks(campaign: Campaign) -> AsyncIterator[str]:
    """The ledger's CSV, ``CSV_BATCH`` rows per chunk: an async iterator, so daphne streams it as it is read."""
    yield BOM + _csv_text([list(ledger.CSV_COLUMNS)])
    after = ""
    while batch := await sync_to_async(ledger.rows)(campaign, after, CSV_BATCH):
        yield _csv_text(
            [
                [spreadsheet_text(user_id), spreadsheet_text(_address(campaign.channel, phone, email)), state,
                 spreadsheet_text(reason), spreadsheet_text(provider),
                 sent_at.isoformat().replace("+00:00", "Z") if sent_at else ""]
                for _, user_id, phone, email, state, reason, provider, sent_at in batch
            ]
        )  # fmt: skip
        after = batch[-1][0]


@require_GET
@staff_only(VIEW)
def ledger_csv(request: HttpRequest, pk: int) -> HttpResponse | StreamingHttpResponse:
    """Every notification of the campaign: user id, masked address, state, reason, provider, sent_at; no params.

    410 once retention may have deleted them (``campaigns/archive.py``).
    """
    campaign = _campaign(pk)
    if campaign.archived_at:
        return HttpResponse(
            f"The notifications of campaign {campaign.pk} were deleted by retention after "
            f"{campaign.archived_at:%Y-%m-%d}: only its counts remain, on its page and in its PDF report.",
            status=410,
            content_type="text/plain; charset=utf-8",
        )
    response = StreamingHttpResponse(_csv_chunks(campaign), content_type="text/csv; charset=utf-8")
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-ledger-{stamp}.csv"'
    return _answer(response)


def eta_text(seconds: float | None) -> str:
    """``95`` → "about 1 min 35 s"; None → "unknown"."""
    if seconds is None:
        return "unknown"
    rounded = timedelta(seconds=round(seconds))
    minutes, secs = divmod(int(rounded.total_seconds()), 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{hours} h"] * bool(hours) + [f"{minutes} min"] * bool(minutes) + [f"{secs} s"] * (not hours)
    return "about " + " ".join(parts)
