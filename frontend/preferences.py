"""The preference center: what a person gets on which channel, quiet hours, time zone and language.

Reached by a signed, expiring link (``links.preference_url``, handed out by
``POST /api/v1/users/{user_id}/preference-link``). Each control is its own
small form: HTMX posts a change at once and the answer — the status partial,
"Saved" in the person's language — lands in a live region beside it.
Without JavaScript the same forms post normally and come back to the page.
Every change goes through ``actions``; security kinds are shown locked. "Stop all marketing" turns
every marketing kind off on every channel at once (``actions.set_marketing``); it shows on while
all of them are off. The page names the email and phone it is about, masked (``l•••@example.com``).
"""

from dataclasses import dataclass
from datetime import time
from zoneinfo import ZoneInfo

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, gettext_noop, pgettext_lazy
from django.views.decorators.http import require_GET, require_POST

from backend.notifications import actions, links, locales
from backend.notifications.locales import text_direction
from backend.notifications.masking import mask_email, mask_phone
from backend.notifications.models import Category, Channel, Kind, Preference, Recipient
from backend.notifications.quiet_hours import parse_wall_time
from frontend.signed_pages import for_person, render_page, status_message

CATEGORIES = [
    (Category.SECURITY, gettext_lazy("Security"), gettext_lazy("Login codes and alerts about your account.")),
    (Category.TRANSACTIONAL, gettext_lazy("Updates"), gettext_lazy("About your orders and your account.")),
    (Category.MARKETING, gettext_lazy("Offers and news"), gettext_lazy("Deals and news from us.")),
]
# A context, so that Django's own "Email" (admin, auth: earlier in INSTALLED_APPS, so they win) does not shadow ours.
CHANNEL_LABELS = {
    Channel.EMAIL: pgettext_lazy("channel", "Email"),
    Channel.SMS: pgettext_lazy("channel", "SMS"),
    Channel.PUSH: pgettext_lazy("channel", "Push notifications"),
    Channel.INAPP: pgettext_lazy("channel", "In-app inbox"),
}
# Kind descriptions are data; those of the demo kinds have translations in frontend/locale (others show as stored).
KIND_DESCRIPTIONS = [
    gettext_noop("One-time login code"),
    gettext_noop("Order shipped"),
    gettext_noop("Marketing offer"),
]
# What rate-limited notifications are folded into: not a choice of its own (as in GET /api/v1/users/{id}/preferences).
HIDDEN_KINDS = {Kind.DIGEST}
DEFAULT_QUIET_HOURS = (time(22, 0), time(7, 0))
REGION_LABELS = {
    "Africa": gettext_lazy("Africa"),
    "America": gettext_lazy("Americas"),
    "Antarctica": gettext_lazy("Antarctica"),
    "Asia": gettext_lazy("Asia"),
    "Atlantic": gettext_lazy("Atlantic Ocean"),
    "Australia": gettext_lazy("Australia"),
    "Europe": gettext_lazy("Europe"),
    "Indian": gettext_lazy("Indian Ocean"),
    "Pacific": gettext_lazy("Pacific Ocean"),
}

preference_page = for_person(links.preference_user)


@dataclass(frozen=True)
class Toggle:
    kind: Kind
    channel: str
    label: str
    enabled: bool
    locked: bool

    @property
    def dom_id(self) -> str:
        return f"pref-{self.kind.name}-{self.channel}"


def kind_label(kind: Kind) -> str:
    return _(kind.description) if kind.description else kind.name


def _groups(recipient: Recipient) -> list[dict]:
    """Kinds by category, a toggle for each channel a kind is sent by (``actions.channels_by_kind``): three queries."""
    chosen = {
        (kind_id, channel): enabled
        for kind_id, channel, enabled in Preference.objects.filter(recipient=recipient).values_list(
            "kind_id", "channel", "enabled"
        )
    }
    kinds = sorted(Kind.objects.exclude(name__in=HIDDEN_KINDS), key=lambda k: locales.collation_key(kind_label(k)))
    sendable = actions.channels_by_kind(kinds)
    groups = []
    for category, title, about in CATEGORIES:
        rows = [
            {
                "kind": kind,
                "label": kind_label(kind),
                "locked": not kind.opt_out_allowed,
                "toggles": [
                    Toggle(
                        kind,
                        channel,
                        str(CHANNEL_LABELS.get(channel, channel)),
                        enabled=not kind.opt_out_allowed or chosen.get((kind.pk, channel), True),
                        locked=not kind.opt_out_allowed,
                    )
                    for channel in sendable[kind.pk]
                ],
            }
            for kind in kinds
            if kind.category == category
        ]
        if rows:
            groups.append({"category": category, "title": title, "about": about, "kinds": rows})
    return groups


def _marketing_group(groups: list[dict]) -> dict | None:
    return next((group for group in groups if group["category"] == Category.MARKETING), None)


def _marketing_stopped(group: dict | None) -> bool:
    """True when the marketing group has switches and every one of them is off."""
    toggles = [toggle for row in group["kinds"] for toggle in row["toggles"]] if group else []
    return bool(toggles) and not any(toggle.enabled for toggle in toggles)


def _time_zone_groups(current: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """The listed zones and the user's own, grouped by region (sorted), each as (name, "City (UTC+03:00)"), by label.

    In English the city is the IANA name's (``Argentina / Buenos Aires``); in any other language
    CLDR's name for it (``الرياض``, ``ریاض``: ``locales.time_zone_cities``). The offset stays in
    Latin digits, isolated in right-to-left pages so that it keeps its order.
    """
    now = timezone.now()
    language = translation.get_language() or "en"
    cities = {} if language.split("-")[0] == "en" else locales.time_zone_cities(language)
    isolate = ("\u2068", "\u2069") if text_direction(language) == "rtl" else ("", "")
    by_region: dict[str, list[tuple[str, str]]] = {}
    for name in set(locales.listed_time_zones()) | {current}:
        region, _sep, place = name.partition("/")
        label = REGION_LABELS.get(region, _("Other")) if place else _("Other")
        # Outside the place areas (UTC, a legacy US/Eastern kept as someone's zone) the whole name says more.
        city = cities.get(name) or (place if region in REGION_LABELS else name).replace("_", " ").replace("/", " / ")
        offset = now.astimezone(ZoneInfo(name)).strftime("%z")
        utc = f"{isolate[0]}UTC{offset[:3]}:{offset[3:]}{isolate[1]}"
        by_region.setdefault(str(label), []).append((name, f"{city} ({utc})"))

    def place(zone: tuple[str, str]) -> tuple:
        return locales.collation_key(zone[1]), zone[0]

    groups = [(region, sorted(zones, key=place)) for region, zones in by_region.items()]
    return sorted(groups, key=lambda item: (item[0] == _("Other"), locales.collation_key(item[0])))


def _languages(current: str) -> list[tuple[str, str]]:
    known = dict(settings.LANGUAGES)
    if current not in known:
        known[current] = locales.native_name(current) if current else current
    return list(known.items())


def _local_time(recipient: Recipient) -> str:
    return timezone.localtime(timezone=ZoneInfo(recipient.time_zone)).strftime("%H:%M")


def _quiet_context(recipient: Recipient) -> dict:
    start, end = recipient.quiet_hours_start, recipient.quiet_hours_end
    return {
        "on": start is not None and end is not None,
        "start": (start or DEFAULT_QUIET_HOURS[0]).strftime("%H:%M"),
        "end": (end or DEFAULT_QUIET_HOURS[1]).strftime("%H:%M"),
    }


def _page_url(token: str) -> str:
    return reverse("frontend:preferences", args=[token])


def _saved(request: HttpRequest, token: str, **extra) -> HttpResponse:
    """HTMX: "Saved" (plus out-of-band updates in ``extra``). Otherwise: back to the page."""
    if not request.htmx:
        return redirect(_page_url(token))
    context = {"ok": True, "message": _("Saved"), "token": token, **extra}
    return render_page(request, "frontend/preferences/_status.html", context)


def _refused(request: HttpRequest, token: str, text: str, status: int = 422) -> HttpResponse:
    """HTMX: why not, in the live region. Otherwise: a page saying why, with the way back."""
    if request.htmx:
        return status_message(request, text, status)
    context = {"message": text, "page_url": _page_url(token)}
    return render_page(request, "frontend/preferences/not_saved.html", context, status=status)


@require_GET
@preference_page
def page(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    groups = _groups(recipient)
    context = {
        "token": token,
        "recipient": recipient,
        "contact": {"email": mask_email(recipient.email), "phone": mask_phone(recipient.phone)},
        "groups": groups,
        "marketing_stopped": _marketing_stopped(_marketing_group(groups)),
        "quiet": _quiet_context(recipient),
        "time_zones": _time_zone_groups(recipient.time_zone),
        "languages": _languages(recipient.language),
        "local_time": _local_time(recipient),
        "saved": request.GET.get("saved", ""),
    }
    return render_page(request, "frontend/preferences/page.html", context)


@require_POST
@preference_page
def channel(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    """Turn one kind on one channel on or off (``enabled`` present: on)."""
    # A kind the page does not show is none a person may switch here: turning off the digest would drop
    # every message folded into it, though each of those kinds is still on.
    kind = Kind.objects.exclude(name__in=HIDDEN_KINDS).filter(name=request.POST.get("kind", "")).first()
    if kind is None:
        return _refused(request, token, _("Unknown type of message."), 404)
    try:
        channel, enabled = request.POST.get("channel", ""), "enabled" in request.POST
        actions.set_preference(recipient, kind, channel, enabled, by=actions.BY_PREFERENCE_CENTER)
    except actions.PreferenceRefused:
        if not kind.opt_out_allowed:
            return _refused(request, token, _("Security messages can't be turned off."), 403)
        return _refused(request, token, _("This message isn't sent on that channel."))
    if kind.category != Category.MARKETING:
        return _saved(request, token)
    # The "stop all marketing" switch follows: on once the last offer is off, off again with the first one on.
    stopped = _marketing_stopped(_marketing_group(_groups(recipient)))
    return _saved(request, token, marketing_switch=True, marketing_stopped=stopped)


@require_POST
@preference_page
def marketing(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    """Stop all marketing (``stopped`` present) on every channel, or turn it all back on; other kinds stay."""
    actions.set_marketing(recipient, enabled="stopped" not in request.POST, by=actions.BY_STOP_ALL_MARKETING)
    return _saved(request, token, marketing_group=_marketing_group(_groups(recipient)))


def _parse_time(value: str) -> time | None:
    try:
        return parse_wall_time(value)
    except ValueError:
        return None


@require_POST
@preference_page
def quiet_hours(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    """Quiet hours on (``enabled`` present, with ``start`` and ``end`` as HH:MM) or off."""
    start = end = None
    if "enabled" in request.POST:
        start = _parse_time(request.POST.get("start", DEFAULT_QUIET_HOURS[0].strftime("%H:%M")))
        end = _parse_time(request.POST.get("end", DEFAULT_QUIET_HOURS[1].strftime("%H:%M")))
        if start is None or end is None:
            return _refused(request, token, _("Enter a start and an end time."))
    was_on = recipient.quiet_hours_start is not None
    try:
        actions.set_quiet_hours(recipient, start, end)
    except actions.PreferenceRefused:  # the only rule left to break: an empty window (start == end)
        return _refused(request, token, _("Quiet hours must end at a different time than they start."))
    if was_on == (start is not None):
        return _saved(request, token)  # times edited: leave the inputs alone (the person may be typing in them)
    return _saved(request, token, quiet=_quiet_context(recipient))  # switched: enable or disable the times


@require_POST
@preference_page
def time_zone(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    try:
        actions.set_locale(recipient, time_zone=request.POST.get("time_zone", ""))
    except actions.PreferenceRefused:
        return _refused(request, token, _("Choose a time zone from the list."))
    return _saved(request, token, local_time=_local_time(recipient))


@require_POST
@preference_page
def language(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    """Change the language; the page reloads in it (HTMX: ``HX-Redirect``) and says "Saved" there."""
    try:
        actions.set_locale(recipient, language=request.POST.get("language", ""))
    except actions.PreferenceRefused:
        return _refused(request, token, _("Choose a language from the list."))
    url = f"{_page_url(token)}?saved=language"
    if request.htmx:
        response = HttpResponse(status=200)
        response["HX-Redirect"] = url
        return response
    return redirect(url)
