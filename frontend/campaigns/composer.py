"""Staff pages for campaigns: the list, the composer with its live pre-flight, and the approver's review.

Marketers (``campaigns.add_campaign`` / ``change_campaign``) compose: name, kind (marketing
or transactional), channel, segment, the approved template version per language (the newest
by default), params shared by every recipient, the schedule (now, at an instant, or at a wall
time in each recipient's zone), an optional end time, and a correction template or a reason
for having none. As the form changes, HTMX posts it to ``compose_preflight``, which answers
the previews per language (right-to-left where the language is) and the pre-flight
(``campaigns/preflight.py``) of the unsaved campaign. Saving and submitting go through
``campaigns.actions`` only, so every rule (security kinds, past schedules, unknown templates)
is the actions' and a refusal shows their message with nothing saved.

Approvers (``campaigns.approve_campaign``) review the frozen content and pre-flight and decide
on the content hash shown to them (a hidden field). The two-person rule is
``actions.approval_problem``: the page shows no decision buttons to whoever it refuses, and a
crafted POST is refused by ``actions.approve`` itself (403), a stale hash with 409.
Staff with ``campaigns.view_campaign`` may read the review page. Anonymous visitors go to the
login page (``staff_only``).
"""

import math
from dataclasses import dataclass, field
from datetime import datetime, time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.contrib import messages
from django.db import transaction
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from backend.notifications import masking, pricing, rendering
from backend.notifications.locales import text_direction
from backend.notifications.models import Category, Channel, Kind, TemplateVersion
from campaigns import actions, pacing, validation
from campaigns.audience import AudienceUnavailable
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, Origin, ScheduleMode, Segment, SegmentMember
from campaigns.preflight import preflight
from campaigns.waves import iso_z
from frontend.editor.views import _answer, staff_only

VIEW, ADD, CHANGE = "campaigns.view_campaign", "campaigns.add_campaign", "campaigns.change_campaign"
APPROVE = "campaigns.approve_campaign"
LIST_LIMIT = 200
CAMPAIGN_CATEGORIES = (Category.MARKETING, Category.TRANSACTIONAL)
INSTANT_FORMAT = "%Y-%m-%dT%H:%M"  # what <input type="datetime-local"> sends
NONE = "none"


# --- the list -------------------------------------------------------------------------------------------------------


@require_GET
@staff_only(VIEW, ADD, APPROVE)
def campaign_list(request: HttpRequest) -> HttpResponse:
    """The newest ``LIST_LIMIT`` campaigns: name, state, author, audience size, created; one query."""
    members = SegmentMember.objects.filter(segment=OuterRef("segment")).values("segment").annotate(n=Count("pk"))
    campaigns = list(
        Campaign.objects.select_related("author", "client", "segment")
        .annotate(list_size=Coalesce(Subquery(members.values("n")), 0))
        .order_by("-created_at", "-pk")[:LIST_LIMIT]
    )
    rows = [(c, _audience_size(c)) for c in campaigns]
    context = {"rows": rows, "can_add": request.user.has_perm(ADD), "limit": LIST_LIMIT}
    return _answer(render(request, "frontend/campaigns/compose_list.html", context))


def _audience_size(campaign: Campaign) -> int | None:
    """The frozen pre-flight's audience, else a list segment's members; None for a filter not yet counted."""
    if campaign.preflight:
        return campaign.preflight["audience"]
    return campaign.list_size if campaign.segment.kind == Segment.Kind.LIST else None


# --- reading the form -----------------------------------------------------------------------------------------------


@dataclass
class LanguagePick:
    """The approved versions of one language (newest first) and the one picked."""

    language: str
    versions: list[TemplateVersion]
    picked: int

    @property
    def direction(self) -> str:
        return text_direction(self.language)


@dataclass
class Composed:
    """The composer form read: ``values`` to show it again, ``fields`` for ``actions``, ``errors`` per input."""

    values: dict[str, str]
    fields: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    kind: Kind | None = None
    picks: list[LanguagePick] = field(default_factory=list)
    params: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """Enough is chosen to count an audience and render the templates."""
        return all(name in self.fields for name in ("kind", "channel", "segment"))


def read_form(data, campaign: Campaign | None = None) -> Composed:
    """The composer's POST (or, with ``campaign``, its stored values) read into ``actions``' fields.

    Never raises: what cannot be read is an entry in ``errors``, named by the input.
    """
    values = _values_of(campaign) if data is None else {key: data.get(key, "").strip() for key in data}
    composed = Composed(values=values)
    _read_name(composed)
    _read_kind_and_channel(composed)
    _read_segment(composed)
    _read_templates(composed, data, campaign)
    _read_params(composed, data, campaign)
    _read_schedule(composed)
    _read_pacing(composed)
    _read_correction(composed)
    return composed


def _values_of(campaign: Campaign | None) -> dict[str, str]:
    if campaign is None:
        return {"schedule_mode": ScheduleMode.NOW, "zone": "UTC", "channel": Channel.SMS}
    zone = "UTC"
    return {
        "name": campaign.name,
        "kind": campaign.kind.name,
        "channel": campaign.channel,
        "segment": str(campaign.segment_id),
        "schedule_mode": campaign.schedule_mode,
        "send_at": _local_input(campaign.send_at, zone),
        "local_time": campaign.local_time.strftime("%H:%M") if campaign.local_time else "",
        "end_at": _local_input(campaign.end_at, zone),
        "zone": zone,
        "correction": str(campaign.correction_version_id or (NONE if campaign.correction_none_reason else "")),
        "correction_none_reason": campaign.correction_none_reason,
        **_pacing_values(campaign, zone),
    }


def _pacing_values(campaign: Campaign, zone: str) -> dict[str, str]:
    """The pacing inputs of a stored campaign: the spread in hours, the rate in its own unit (``_rate_input``)."""
    hours = campaign.spread_seconds / 3600 if campaign.spread_seconds is not None else None
    rate, unit = _rate_input(campaign.rate_per_second)
    return {
        "spread_hours": f"{hours:g}" if hours is not None else "",
        "spread_until": _local_input(campaign.spread_until, zone),
        "rate": rate,
        "rate_unit": unit,
        "sending_hours_start": _wall_input(campaign.sending_hours_start),
        "sending_hours_end": _wall_input(campaign.sending_hours_end),
    }


def _rate_input(per_second: float | None) -> tuple[str, str]:
    """The composer's rate and unit: "500" or "7000" per hour, not "0.138889" or "1.94444" per second.

    In the unit it was most likely given in (``pacing.rate_unit``, as ``pacing.describe`` says it)
    and without dropping a digit: cut to 6 digits, saving the form unchanged would move the rate (and the hash).
    """
    if per_second is None:
        return "", "second"
    return pacing.rate_amount(per_second)


def _wall_input(value: time | None) -> str:
    return value.strftime("%H:%M") if value else ""


def _local_input(instant: datetime | None, zone: str) -> str:
    return instant.astimezone(ZoneInfo(zone)).strftime(INSTANT_FORMAT) if instant else ""


def _read_name(composed: Composed) -> None:
    name = composed.values.get("name", "")
    problem = validation.name_problem(name)
    if problem:
        composed.errors["name"] = problem
    else:
        composed.fields["name"] = name


def _read_kind_and_channel(composed: Composed) -> None:
    kind = Kind.objects.filter(name=composed.values.get("kind", "")).first()
    if kind is None:
        composed.errors["kind"] = "Pick a kind of message."
    elif kind.category == Category.SECURITY:
        composed.errors["kind"] = f"{kind.name}: {actions.SECURITY_REFUSED}."
    elif kind.category not in CAMPAIGN_CATEGORIES:
        composed.errors["kind"] = f"{kind.name}: only marketing and transactional kinds can be sent as a campaign."
    elif kind.name == Kind.DIGEST:
        composed.errors["kind"] = f"{kind.name}: {actions.DIGEST_REFUSED}."
    else:
        composed.kind = composed.fields["kind"] = kind
    channel = composed.values.get("channel", "")
    if channel not in Channel.values:
        composed.errors["channel"] = "Pick a channel."
    elif kind is not None and channel not in kind.channels:
        composed.errors["channel"] = f"{kind.name} is sent on {', '.join(kind.channels)}, not {channel}."
    else:
        composed.fields["channel"] = channel


def _read_segment(composed: Composed) -> None:
    raw = composed.values.get("segment", "")
    segment = Segment.objects.filter(pk=int(raw)).first() if raw.isdigit() else None
    if segment is None:
        composed.errors["segment"] = "Pick a segment: who the campaign goes to."
    else:
        composed.fields["segment"] = segment


def _approved_by_language(kind: Kind, channel: str) -> dict[str, list[TemplateVersion]]:
    versions: dict[str, list[TemplateVersion]] = {}
    approved = TemplateVersion.objects.filter(kind=kind, channel=channel, status=TemplateVersion.Status.APPROVED)
    for version in approved.order_by("language", "-version"):
        versions.setdefault(version.language, []).append(version)
    return versions


def _read_templates(composed: Composed, data, campaign: Campaign | None) -> None:
    """One pick per language of kind × channel: the version named, else the newest approved one."""
    if composed.kind is None or "channel" not in composed.fields:
        return
    by_language = _approved_by_language(composed.kind, composed.fields["channel"])
    if campaign is not None and campaign.origin_purpose == Origin.CORRECTION:
        # A correction sends its correction texts only: a language it has none in must not be filled with the
        # kind's ordinary template, which may be the very message being corrected (actions.draft_correction).
        by_language = {language: v for language, v in by_language.items() if language in campaign.template_versions}
    stored = campaign.template_versions if data is None and campaign else {}
    for language, versions in by_language.items():
        raw = str(stored.get(language, "")) if data is None else composed.values.get(f"template_{language}", "")
        picked = versions[0].pk
        if raw:
            match = next((v for v in versions if str(v.pk) == raw), None)
            if match is None:
                composed.errors[f"template_{language}"] = (
                    f"Unknown template version {raw!r} for {language}: pick an approved one."
                )
            else:
                picked = match.pk
        composed.picks.append(LanguagePick(language, versions, picked))
    for key in composed.values:
        language = key.removeprefix("template_")
        if key.startswith("template_") and language not in by_language:
            composed.errors[key] = f"There is no approved {composed.kind.name} template in {language!r}."
    composed.fields["template_versions"] = {pick.language: pick.picked for pick in composed.picks}


def _read_params(composed: Composed, data, campaign: Campaign | None) -> None:
    """The kind's declared params: text, or one item a line for a list param; within ``max_length``."""
    if composed.kind is None:
        return
    stored = campaign.params if data is None and campaign else {}
    params: dict[str, Any] = {}
    for name, spec in composed.kind.params.items():
        is_list = validation.is_list_param(spec)
        if data is None:
            value = stored.get(name, [] if is_list else "")
            raw = "\n".join(value) if is_list else str(value)
            composed.values[f"param_{name}"] = raw
        else:
            raw = data.get(f"param_{name}", "").strip()
        value = [line.strip() for line in raw.splitlines() if line.strip()] if is_list else raw
        problem = validation.param_problem(name, spec, value)
        if problem:
            composed.errors[f"param_{name}"] = problem
        elif value:
            params[name] = value
        composed.params.append({"name": name, "spec": spec, "list": is_list, "value": raw})
    composed.fields["params"] = params


def _zone(composed: Composed) -> ZoneInfo | None:
    name = composed.values.get("zone") or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        composed.errors["zone"] = f"Unknown time zone {name!r}: an IANA name such as Asia/Riyadh or UTC."
        return None


def _instant(composed: Composed, name: str) -> datetime | None:
    """The instant typed in field ``name``, read in the form's time zone; None when empty or unreadable (an error).

    The zone is read only when an instant needs it: a local-time campaign without an end ignores it.
    """
    raw = composed.values.get(name, "")
    if not raw:
        return None
    zone = _zone(composed)
    if zone is None:
        return None
    try:
        return datetime.strptime(raw, INSTANT_FORMAT).replace(tzinfo=zone)
    except ValueError:
        composed.errors[name] = f"{raw!r} is not a date and time (YYYY-MM-DDTHH:MM)."
        return None


def _read_schedule(composed: Composed) -> None:
    mode = composed.values.get("schedule_mode", ScheduleMode.NOW)
    if mode not in ScheduleMode.values:
        composed.errors["schedule_mode"] = "Pick when it goes out: now, at an instant, or at a local time."
        return
    fields = {"schedule_mode": mode, "send_at": None, "local_time": None, "end_at": _instant(composed, "end_at")}
    if mode == ScheduleMode.AT:
        fields["send_at"] = _instant(composed, "send_at")
        if fields["send_at"] is None and "send_at" not in composed.errors:
            composed.errors["send_at"] = "Give the instant it goes out."
    if mode == ScheduleMode.LOCAL_TIME:
        raw = composed.values.get("local_time", "")
        try:
            wall = time.fromisoformat(raw)
        except ValueError:
            composed.errors["local_time"] = "Give the local time it goes out, such as 09:00."
        else:
            problem = validation.wall_time_problem(wall)
            if problem:
                composed.errors["local_time"] = problem
            else:
                fields["local_time"] = wall
    composed.fields.update(fields)


# Seconds per unit of the composer's rate ("messages per second / per hour").
RATE_UNITS = {"second": 1, "hour": 3600}


def _read_pacing(composed: Composed) -> None:
    """Spread ("over N hours" or "until"), rate per second or per hour, sending hours: ``campaigns.pacing``'s fields.

    Only their form is checked here; what they must be (a window > 0, a rate within the budget…)
    is ``pacing.pacing_problem``'s, through ``actions``.
    """
    fields: dict[str, Any] = {"spread_seconds": None, "rate_per_second": None}
    hours = _number(composed, "spread_hours", "Give the spread as a number of hours, e.g. 10 or 0.5.")
    if hours is not None:
        # 1e308 hours is finite, its seconds are not (round(inf) was a 500): past the longest window
        # either way, so pacing.pacing_problem words the refusal.
        fields["spread_seconds"] = round(min(max(hours * 3600, -1), pacing.MAX_SPREAD_SECONDS + 1))
    fields["spread_until"] = _instant(composed, "spread_until")
    rate = _number(composed, "rate", "Give the rate as a number of messages, e.g. 50.")
    unit = composed.values.get("rate_unit") or "second"
    if unit not in RATE_UNITS:
        composed.errors["rate_unit"] = "Pick messages per second or per hour."
    elif rate is not None:
        fields["rate_per_second"] = rate / RATE_UNITS[unit]
    for name in ("sending_hours_start", "sending_hours_end"):
        raw = composed.values.get(name, "")
        try:
            fields[name] = time.fromisoformat(raw) if raw else None
        except ValueError:
            composed.errors[name] = "Give a wall time such as 09:00."
    composed.fields.update(fields)


def _number(composed: Composed, name: str, problem: str) -> float | None:
    raw = composed.values.get(name, "")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        composed.errors[name] = problem
        return None
    return value


def _read_correction(composed: Composed) -> None:
    raw = composed.values.get("correction", "")
    reason = composed.values.get("correction_none_reason", "")
    if raw == NONE:
        composed.fields.update(correction_version=None, correction_none_reason=reason)
        if not reason:
            composed.errors["correction_none_reason"] = "Say why this campaign needs no correction template."
        return
    version = TemplateVersion.objects.filter(pk=int(raw)).first() if raw.isdigit() else None
    if raw and version is None:
        composed.errors["correction"] = f"Unknown template version {raw!r}: pick one from the list."
    composed.fields.update(correction_version=version, correction_none_reason="")


def _corrections(composed: Composed) -> list[TemplateVersion]:
    """Approved versions a correction may use: the channel's, of the campaign kind's category (``actions``' rule)."""
    channel = composed.fields.get("channel") or composed.values.get("channel", "")
    categories = [composed.kind.category] if composed.kind else CAMPAIGN_CATEGORIES
    return list(
        TemplateVersion.objects.filter(
            status=TemplateVersion.Status.APPROVED, channel=channel, kind__category__in=categories
        )
        .select_related("kind")
        .order_by("kind__name", "language", "-version")
    )


# --- previews and the pre-flight ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LanguagePreview:
    """One language's message rendered with the campaign's params (``error`` when it does not render)."""

    language: str
    version: TemplateVersion
    subject: str = ""
    text: str = ""
    error: str = ""

    @property
    def direction(self) -> str:
        return text_direction(self.language)


def previews(kind: Kind, template_versions: dict[str, int], params: dict, languages: list[str] | None = None) -> list:
    """The message in each language (of ``languages``, the audience's, when given), rendered with ``params``.

    Secret params (``masking``) are rendered as ``••••••``: staff never read a secret in a preview.
    """
    params = masking.masked_params(kind, params)
    versions = TemplateVersion.objects.in_bulk([int(pk) for pk in template_versions.values()])
    shown = []
    for language, pk in sorted(template_versions.items()):
        version = versions.get(int(pk))
        if version is None or (languages is not None and language not in languages):
            continue
        try:
            rendered = rendering.render(version, params)
        except rendering.RenderError as exc:
            shown.append(LanguagePreview(language, version, error=str(exc)))
            continue
        shown.append(LanguagePreview(language, version, subject=rendered.subject, text=rendered.text))
    return shown


def _live(composed: Composed) -> dict[str, Any]:
    """The pre-flight and previews of the unsaved campaign, or why they cannot be shown yet."""
    if not composed.ready:
        # A kind and channel that do not go together are said at once, not only on submit.
        chosen = [
            composed.errors[name]
            for name in ("kind", "channel")
            if composed.values.get(name) and name in composed.errors
        ]
        return {
            "live_hint": " ".join(chosen)
            or "Pick a kind, a channel and a segment to see who it reaches and what it costs."
        }
    campaign = Campaign(**{k: v for k, v in composed.fields.items() if k in actions.EDITABLE_FIELDS})
    if not composed.picks:
        return {
            "live_error": f"{composed.kind.name} has no approved template on {campaign.channel}: approve one first."
        }
    context: dict[str, Any] = {"previews": previews(composed.kind, campaign.template_versions, campaign.params)}
    now = timezone.now()
    # The expected end is worked out from the pacing: one it cannot keep (a rate of 1e-300/s) would overflow it.
    unkept = pacing.pacing_problem(campaign, now)
    if unkept:
        context["live_error"] = f"No pre-flight yet: {unkept[1]}"
        return context
    try:
        figures = preflight(campaign, now)
    except (AudienceUnavailable, rendering.RenderError, pricing.PriceListError, actions.CampaignRefused) as exc:
        context["live_error"] = f"No pre-flight yet: {exc}"
        return context
    context["figures"] = display(figures, campaign)
    context["previews"] = [p for p in context["previews"] if p.language in figures["languages"]] or context["previews"]
    return context


STOP_LABELS = {
    "opted-out": "Opted out of this kind",
    "no-address": "No address on the channel",
    "address-disabled": "Address disabled (bounced or unreachable)",
    "no-device": "No push device",
    "no-template": "No template in their language",
}


def display(figures: dict[str, Any], campaign: Campaign | None = None) -> dict[str, Any]:
    """The pre-flight dict with labels a page shows: instants in UTC, stop reasons in words, the duration.

    ``campaign`` (the one the figures are of) says whether it has sending hours, which the expected end waits for.
    """
    shown = dict(figures)
    shown["sending_hours"] = bool(campaign and campaign.sending_hours_start is not None)
    shown["stopped_rows"] = [(STOP_LABELS.get(reason, reason), n) for reason, n in figures["stopped"].items()]
    shown["stopped_total"] = sum(figures["stopped"].values())
    shown["wave_rows"] = [
        {
            **wave,
            "utc": datetime.fromisoformat(wave["at"]).strftime("%Y-%m-%d %H:%M UTC"),
            "waiting": _waiting_zones(wave, campaign),
        }
        for wave in figures["waves"]
    ]
    end = figures.get("expected_end")  # absent from a pre-flight frozen before pacing
    shown["expected_end_label"] = datetime.fromisoformat(end).strftime("%Y-%m-%d %H:%M UTC") if end else ""
    rate, budget = figures.get("rate_per_second"), figures.get("budget_per_second")
    shown["rate_label"] = pacing.rate_words(rate) if rate else ""
    # Held below the budget by its spread or rate: the budget's duration would contradict the expected end,
    # and without a budget "no duration estimate" beside the expected pace would too.
    shown["paced"] = bool(rate and (budget is None or rate < budget))
    seconds = figures.get("duration_seconds")
    shown["duration_label"] = _duration(seconds) if seconds is not None else ""
    return shown


def _waiting_zones(wave: dict[str, Any], campaign: Campaign | None) -> list[dict[str, str]]:
    """The zones of ``wave`` outside ``campaign``'s sending hours at its instant, by when the hours open there.

    The wave's size counts them at its instant, but their rows wait for the opening (``pacing.hours_open``):
    ``{"zones": "Europe/Berlin, Europe/Paris", "local": "09:00", "at": "…T08:00:00Z", "utc": "… 08:00 UTC"}``.
    """
    start, end = (campaign.sending_hours_start, campaign.sending_hours_end) if campaign else (None, None)
    if start is None or end is None:
        return []
    at = datetime.fromisoformat(wave["at"])
    opening: dict[tuple[datetime, str], list[str]] = {}
    for zone in wave["zones"]:
        opens = pacing.hours_open(at, zone, start, end)
        if opens is not None:
            opening.setdefault((opens, f"{opens.astimezone(ZoneInfo(zone)):%H:%M}"), []).append(zone)
    return [
        {"zones": ", ".join(zones), "local": local, "at": iso_z(opens), "utc": f"{opens:%Y-%m-%d %H:%M} UTC"}
        for (opens, local), zones in sorted(opening.items())
    ]


def _duration(seconds: float) -> str:
    """``0.29 s``, ``2 min 5 s``, ``3 h 20 min``: the expected sending time at the budget."""
    if seconds < 60:
        return f"{seconds:g} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest} s"
    return f"{minutes // 60} h {minutes % 60} min"


# --- the composer ---------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@staff_only(ADD)
def compose_new(request: HttpRequest) -> HttpResponse:
    """The empty composer (GET); POST saves a draft (``save``) or saves and submits it (``submit``)."""
    if request.method == "GET":
        empty = read_form(None)
        empty.errors.clear()  # nothing typed yet: nothing wrong yet
        return _compose_page(request, empty, None)
    composed = read_form(request.POST)
    if composed.errors:
        return _compose_page(request, composed, None, status=400)
    try:
        with transaction.atomic():
            campaign = actions.create_draft(request.user, **_editable(composed)).campaign
            if "submit" in request.POST:
                campaign = actions.submit(campaign, request.user)
    except actions.CampaignRefused as exc:
        return _compose_page(request, composed, None, refused=exc)
    return _saved(request, campaign)


@require_http_methods(["GET", "POST"])
@staff_only(CHANGE)
def compose_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """The composer of a campaign not yet running; POST edits it (``save``) and may submit it (``submit``).

    An edit of a submitted, approved or rejected campaign returns it to draft (``actions.edit``);
    the page then says why.
    """
    campaign = get_object_or_404(Campaign.objects.select_related("kind", "segment"), pk=pk)
    if request.method == "GET":
        return _compose_page(request, read_form(None, campaign), campaign)
    composed = read_form(request.POST)
    if composed.errors:
        return _compose_page(request, composed, campaign, status=400)
    try:
        with transaction.atomic():
            edited = actions.edit(campaign, request.user, **_editable(composed))
            if "submit" in request.POST:
                edited = actions.submit(edited, request.user)
    except actions.CampaignRefused as exc:
        return _compose_page(request, composed, campaign, refused=exc)
    return _saved(request, edited)


@require_POST
@staff_only(ADD, CHANGE)
def compose_preflight(request: HttpRequest) -> HttpResponse:
    """The live panel (HTMX): previews and pre-flight of the form as it is; new pickers when kind or channel changed."""
    composed = read_form(request.POST)
    context = {**_form_context(composed), **_live(composed), "oob": True}
    context["pickers_changed"] = composed.values.get("pickers_for", "") != context["pickers_for"]
    return _answer(render(request, "frontend/campaigns/compose_live.html", context))


def _editable(composed: Composed) -> dict[str, Any]:
    return {name: value for name, value in composed.fields.items() if name in actions.EDITABLE_FIELDS}


def _saved(request: HttpRequest, campaign: Campaign) -> HttpResponse:
    if campaign.state == Campaign.State.SUBMITTED:
        messages.success(request, f"Submitted {campaign.name!r}: a second person must approve it.")
    else:
        messages.success(request, f"Saved {campaign.name!r} as a draft.")
    return redirect("frontend:campaign-edit", pk=campaign.pk)


def _form_context(composed: Composed) -> dict[str, Any]:
    kind, channel = composed.kind, composed.fields.get("channel", "")
    return {
        "composed": composed,
        "values": composed.values,
        "errors": composed.errors,
        "kinds": Kind.objects.filter(category__in=CAMPAIGN_CATEGORIES).exclude(name=Kind.DIGEST).order_by("name"),
        "channels": Channel.choices,
        "segments": Segment.objects.order_by("-created_at", "-pk")[:LIST_LIMIT],
        "modes": ScheduleMode.choices,
        "corrections": _corrections(composed),
        "pickers_for": f"{kind.name if kind else ''}:{channel}",
    }


def _compose_page(
    request: HttpRequest,
    composed: Composed,
    campaign: Campaign | None,
    status: int = 200,
    refused: actions.CampaignRefused | None = None,
) -> HttpResponse:
    context = {**_form_context(composed), **_live(composed), "campaign": campaign, "oob": False}
    if refused is not None:
        context["refused"] = refused.message
        status = refused.status
    if campaign is not None:
        context["void_reason"] = void_reason(campaign)
        context["rejection"] = rejection(campaign)
        context["editable"] = campaign.state in actions.EDITABLE_STATES
    return _answer(render(request, "frontend/campaigns/compose.html", context, status=status))


def rejection(campaign: Campaign) -> CampaignApproval | None:
    """The approver's rejection the author should read: the latest decision, while the campaign is rejected."""
    if campaign.state != Campaign.State.REJECTED:
        return None
    return campaign.approvals.select_related("approver").filter(decision=CampaignApproval.Decision.REJECTED).first()


def void_reason(campaign: Campaign) -> str:
    """Why the campaign went back to draft (its audit's detail), while it has not been submitted again."""
    if campaign.state != Campaign.State.DRAFT:
        return ""
    actions_seen = (CampaignAudit.Action.EDIT, CampaignAudit.Action.VOID, CampaignAudit.Action.SUBMIT)
    for audit in campaign.audit.filter(action__in=actions_seen).order_by("-at", "-pk"):
        if audit.action == CampaignAudit.Action.SUBMIT:
            return ""
        if audit.detail.get("reason"):
            return audit.detail["reason"]
    return ""


# --- the review -----------------------------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@staff_only(VIEW, APPROVE)
def review(request: HttpRequest, pk: int) -> HttpResponse:
    """The frozen content, pre-flight and hash (GET); POST approves or rejects the hash shown.

    The decision goes through ``actions.approve`` / ``actions.reject`` only: 403 with the rule's
    message for whoever it refuses (the author, a writer, no permission), 409 when the hash
    shown is stale, 422 for a rejection without a comment.
    """
    campaign = get_object_or_404(Campaign.objects.select_related("kind", "segment", "author"), pk=pk)
    if request.method == "GET":
        return _review_page(request, campaign)
    decision, shown_hash = request.POST.get("decision", ""), request.POST.get("content_hash", "")
    try:
        if decision == "approve":
            actions.approve(campaign, request.user, shown_hash, request.POST.get("comment", ""))
        elif decision == "reject":
            actions.reject(campaign, request.user, shown_hash, request.POST.get("comment", ""))
        else:
            raise actions.CampaignRefused("Choose approve or reject.", "decision")
    except actions.CampaignRefused as exc:
        campaign.refresh_from_db()
        return _review_page(request, campaign, error=exc.message, status=exc.status)
    messages.success(request, f"{'Approved' if decision == 'approve' else 'Rejected'} {campaign.name!r}.")
    return redirect("frontend:campaign-review", pk=campaign.pk)


def _review_page(request: HttpRequest, campaign: Campaign, error: str = "", status: int = 200) -> HttpResponse:
    problem = actions.approval_problem(campaign, request.user)
    languages = list(campaign.preflight.get("languages", {})) or None
    shown = previews(campaign.kind, campaign.template_versions, campaign.params, languages)
    context = {
        "campaign": campaign,
        "shown_params": masking.masked_params(campaign.kind, campaign.params),
        "figures": display(campaign.preflight, campaign) if campaign.preflight else None,
        "previews": shown,
        "can_decide": problem is None,
        "why_not": problem,
        "error": error,
        "void_reason": void_reason(campaign),
        "approvals": campaign.approvals.select_related("approver"),
        "correction": campaign.correction_version,
        "pacing": pacing.describe(campaign),
    }
    return _answer(render(request, "frontend/campaigns/review.html", context, status=status))
