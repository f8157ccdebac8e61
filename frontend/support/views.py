"""The support explorer's pages, ``/support/`` (``backend/support/`` reads and writes what they show).

Support agents (``support.use_explorer``) and the superuser see them; other staff get 403 and
anonymous visitors the login page (``staff_only``). Phone numbers and email addresses are
masked; revealing one is a POST that writes a ``ContactReveal`` row first
(``support.reveal_contact``). The replay button is shown to, and accepted from, those who may
replay dead letters (``notifications.change_deadletter``), through ``actions.replay``.
"""

import uuid

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from backend.notifications import actions
from backend.notifications.masking import mask_email, mask_phone, mask_push_token
from backend.notifications.models import (
    Channel,
    Erasure,
    Kind,
    Notification,
    Preference,
    Priority,
    Recipient,
    State,
)
from backend.support import export, pdf, search, trail
from backend.support.reveal import REVEAL, ReasonMissing, reveal
from campaigns.report import first_strong_direction
from frontend.editor.views import staff_only

USE = "support.use_explorer"
REPLAY = "notifications.change_deadletter"
# The newest notifications a user's page lists (the search pages on from there).
USER_HISTORY = 20


def _private(response: HttpResponse) -> HttpResponse:
    """Every page here shows personal data: never cached, and the HTMX partials differ from the pages."""
    patch_vary_headers(response, ["HX-Request"])
    add_never_cache_headers(response)
    return response


def _search_request(request: HttpRequest) -> tuple[search.Lookup, search.Filters, search.Cursor | None]:
    """The lookup, filters and cursor a search request names; raises ``search.SearchError``."""
    lookup = search.resolve(request.GET.get("q", ""), request.GET.get("as", "auto") or "auto")
    filters = search.parse_filters(request.GET)
    after = request.GET.get("after", "")
    return lookup, filters, search.Cursor.parse(after) if after else None


def _choices() -> dict:
    return {
        "states": State.values, "channels": Channel.values, "priorities": Priority.values,
        "kinds": list(Kind.objects.order_by("name").values_list("name", flat=True)),
        "search_kinds": [(kind, search.KIND_LABELS[kind]) for kind in search.KINDS],
    }  # fmt: skip


def _kept() -> dict:
    """How long ended notifications are kept (``retention``), to say why a search may find nothing; 0: forever."""
    return {"retention_days": settings.NOTIFY["RETENTION_DAYS"]}


@require_GET
@staff_only(USE)
def search_page(request: HttpRequest) -> HttpResponse:
    """The search box, its filters and one page of results in its order; a search it cannot read is a 400."""
    context = {**_choices(), **_kept(), "params": request.GET, "error": "", "page": None}
    status = 200
    if request.GET.get("q", "").strip():
        try:
            lookup, filters, after = _search_request(request)
            context["page"] = search.page(lookup, filters, after)
        except search.SearchError as exc:
            context["error"], status = str(exc), 400
        if context["page"] is not None:
            context["rows"] = [_row(n) for n in context["page"].rows]
            if not context["rows"]:
                context["erased"] = Erasure.objects.filter(
                    user_id_digest=Erasure.digest_of(request.GET["q"].strip())
                ).first()
            query = request.GET.copy()
            query["as"] = context["page"].lookup.kind
            query.pop("after", None)
            context["same_search"] = query.urlencode()
    return _private(render(request, "frontend/support/search.html", context, status=status))


def _row(notification: Notification) -> dict:
    recipient = notification.recipient
    return {
        "n": notification, "phone": mask_phone(recipient.phone), "email": mask_email(recipient.email),
        "state": trail.state_label(notification.state), "direction": first_strong_direction(notification.preview),
    }  # fmt: skip


@require_GET
@staff_only(USE)
def export_csv(request: HttpRequest) -> HttpResponse:
    """The whole current search as CSV, streamed (``backend/support/export.py``); a bad search is a 400."""
    try:
        lookup, filters, _ = _search_request(request)
    except search.SearchError as exc:
        return _private(HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8"))
    response = StreamingHttpResponse(export.csv_lines(lookup, filters), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="notifications-{lookup.kind}.csv"'
    return _private(response)


def _notification(pk: uuid.UUID) -> Notification:
    rows = Notification.objects.select_related("recipient", "kind", "client", "digest", "template_version")
    return get_object_or_404(rows, pk=pk)


@require_GET
@staff_only(USE)
def notification_page(request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
    """One notification: the decision trail, template version, preview, attempts, dead letters, replay."""
    notification = _notification(pk)
    recipient = notification.recipient
    letters = list(notification.dead_letters.all())
    context = {
        "n": notification, "recipient": recipient, "steps": trail.trail(notification),
        "attempts": list(notification.attempts.select_related("device")), "letters": letters,
        "history": list(notification.state_changes.all()), "state": trail.state_label(notification.state),
        "direction": first_strong_direction(notification.preview),
        "phone": mask_phone(recipient.phone), "email": mask_email(recipient.email),
        "can_reveal": request.user.has_perm(REVEAL),
        # Support agents read the version's text here; the editor's page is for those who may open it.
        "can_open_templates": request.user.has_perm("notifications.view_templateversion"),
        "can_replay": request.user.has_perm(REPLAY) and any(letter.replayed_at is None for letter in letters),
        "held": notification.digested.count() if notification.reason == "digest" else 0,
    }  # fmt: skip
    return _private(render(request, "frontend/support/notification.html", context))


@require_GET
@staff_only(USE)
def notification_pdf(request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
    """One notification's history as a PDF download."""
    return pdf.notification_pdf(_notification(pk))


@require_POST
@staff_only(USE)
def replay(request: HttpRequest, pk: uuid.UUID) -> HttpResponse:
    """Replay the notification's open dead letter (``actions.replay``: never past its validity)."""
    if not request.user.has_perm(REPLAY):
        raise PermissionDenied
    notification = _notification(pk)
    letter = notification.dead_letters.filter(replayed_at__isnull=True).first()
    if letter is None:
        messages.info(request, "Nothing to replay: it has no open dead letter.")
    else:
        outcome = actions.replay(letter, by=request.user.get_username())
        messages.info(request, {"replayed": "Replayed: it is queued again.",
                                "expired": "Not replayed: it is past its validity, so it expired.",
                                "skipped": "Not replayed: it had already moved on."}[outcome])  # fmt: skip
    return redirect("support:notification", pk=notification.pk)


def _recipient(user_id: str) -> Recipient:
    return get_object_or_404(Recipient, user_id=user_id)


@require_GET
@staff_only(USE)
def user_page(request: HttpRequest, user_id: str) -> HttpResponse:
    """One user: masked contact data, devices (tokens masked) and why any is disabled, preferences, recent history."""
    recipient = _recipient(user_id)
    recent = list(
        Notification.objects.filter(recipient=recipient).select_related("kind", "recipient")
        .order_by("-created_at", "-id")[:USER_HISTORY]
    )  # fmt: skip
    context = {
        "recipient": recipient, "phone": mask_phone(recipient.phone), "email": mask_email(recipient.email),
        "devices": [(d, mask_push_token(d.platform, d.token)) for d in recipient.devices.all()],
        "can_reveal": request.user.has_perm(REVEAL),
        "preferences": list(Preference.objects.filter(recipient=recipient).select_related("kind")
                            .order_by("kind__name", "channel")),
        "rows": [_row(n) for n in recent], "more": len(recent) == USER_HISTORY, **_kept(),
    }  # fmt: skip
    return _private(render(request, "frontend/support/user.html", context))


@require_GET
@staff_only(USE)
def user_pdf(request: HttpRequest, user_id: str) -> HttpResponse:
    """One user's recent history as a PDF download."""
    return pdf.user_pdf(_recipient(user_id))


@require_POST
@staff_only(USE)
def reveal_contact(request: HttpRequest, user_id: str, field: str) -> HttpResponse:
    """Show a masked phone or email in clear after writing the audit row; HTMX gets the value's partial."""
    if field not in ("phone", "email"):
        return _private(HttpResponse("Only a phone number or an email address can be revealed.", status=400))
    recipient = _recipient(user_id)
    notification = None
    if request.POST.get("notification"):
        notification = Notification.objects.filter(pk=_uuid(request.POST["notification"]), recipient=recipient).first()
    try:
        value = reveal(request.user, recipient, field, notification, reason=request.POST.get("reason", ""))
    except ReasonMissing as exc:
        return _private(HttpResponse(str(exc), status=422, content_type="text/plain; charset=utf-8"))
    except Recipient.DoesNotExist:
        message = "This person's record was erased a moment ago, on their request: nothing is shown."
        return _private(HttpResponse(message, status=404, content_type="text/plain; charset=utf-8"))
    context = {"field": field, "value": value}
    if request.htmx:
        return _private(render(request, "frontend/support/_revealed.html", context))
    messages.info(request, f"{recipient.user_id}'s {field}: {value or 'none'} (this was recorded).")
    return redirect("support:user", user_id=recipient.user_id)


def _uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return None
