"""Staff pages of the template editor: the list, the editor, its live preview, save and approve.

Who may do what is decided here, at the top of each view (``staff_only``),
never by an ``{% if %}`` around a partial: staff with ``view_templateversion``
(or ``change_…``) see the pages and the live preview, ``change_templateversion``
saves drafts, and approval is ``actions.approve_template`` (the approve
permission and the two-person rule live there). The approve form names the
content hash of the text the page showed, so an approval covers exactly what
its approver read. Anonymous visitors go to the admin login (``LOGIN_URL``).
"""

import json
import re
from dataclasses import dataclass, replace
from functools import wraps

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from backend.notifications import actions, masking
from backend.notifications.actions import send_to_self
from backend.notifications.models import Channel, Kind, TemplateEvent, TemplateVersion
from frontend.editor import highlight, preview
from frontend.editor.forms import (
    CHANNEL_PARTS,
    DEFAULT_AUDIENCE,
    MAX_AUDIENCE,
    EditorForm,
    country_choices,
    default_country,
    language_choices,
)

VIEW = "notifications.view_templateversion"
EDIT = "notifications.change_templateversion"
# Fields that name the template; a request with one of them wrong was not made by the page.
_IDENTITY = ("kind", "language", "channel")
_SHA256 = re.compile(r"[0-9a-f]{64}")
# The newest events the editor's history shows.
_HISTORY_EVENTS = 50


def staff_only(*any_of: str):
    """Active staff holding any of these permissions; others get 403, anonymous visitors the login page."""

    def decorator(view):
        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            user = request.user
            if not user.is_authenticated:
                login = redirect_to_login(_page_url(request))
                return HttpResponseClientRedirect(login.url) if request.htmx else login
            if not (user.is_active and user.is_staff and any(user.has_perm(perm) for perm in any_of)):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        return wrapper

    return decorator


def _page_url(request: HttpRequest) -> str:
    """Where to come back after logging in: the page, not the partial an HTMX request asked for."""
    if request.htmx:
        try:
            current = request.htmx.current_url_abs_path
        except ValueError:  # an HX-Current-URL that is no URL ("http://[::1") is a 500 in django-htmx
            current = None
        if current:
            return current
    return request.get_full_path() if request.method == "GET" else reverse("frontend:templates")


def _answer(response: HttpResponse) -> HttpResponse:
    """Every page here differs by HX-Request (page or partial) and is private to the staff member."""
    patch_vary_headers(response, ["HX-Request"])
    add_never_cache_headers(response)
    return response


def _wants_partial(request: HttpRequest) -> bool:
    # A history restore after "back" asks for the whole page, though it comes from HTMX.
    return bool(request.htmx) and not request.htmx.history_restore_request


# --- the list -------------------------------------------------------------------------------------------------------


@dataclass
class TemplateRow:
    """One kind × language × channel and its versions, newest first."""

    kind: Kind
    language: str
    channel: str
    versions: list[TemplateVersion]

    @property
    def latest(self) -> TemplateVersion:
        return self.versions[0]

    @property
    def live(self) -> TemplateVersion | None:
        """The version that is sent: the newest approved one."""
        return next((v for v in self.versions if v.status == TemplateVersion.Status.APPROVED), None)

    @property
    def awaiting_approval(self) -> bool:
        return self.latest.status == TemplateVersion.Status.DRAFT


def _rows(filters: dict[str, str]) -> list[TemplateRow]:
    versions = TemplateVersion.objects.select_related("kind", "created_by", "approved_by")
    if filters.get("kind"):
        versions = versions.filter(kind__name=filters["kind"])
    if filters.get("language"):
        versions = versions.filter(language=filters["language"])
    if filters.get("channel"):
        versions = versions.filter(channel=filters["channel"])
    rows: dict[tuple, TemplateRow] = {}
    for version in versions.order_by("kind__name", "language", "channel", "-version"):
        key = (version.kind_id, version.language, version.channel)
        rows.setdefault(key, TemplateRow(version.kind, version.language, version.channel, [])).versions.append(version)
    found = list(rows.values())
    if filters.get("status") == "draft":
        found = [row for row in found if row.awaiting_approval]
    return found


@require_GET
@staff_only(VIEW, EDIT)
def template_list(request: HttpRequest) -> HttpResponse:
    """Every template by kind × language × channel: the live version and any draft awaiting approval."""
    filters = {name: request.GET.get(name, "") for name in ("kind", "language", "channel", "status")}
    context = {
        "rows": _rows(filters),
        "filters": filters,
        "kinds": Kind.objects.order_by("name"),
        "languages": language_choices(),
        "channels": Channel.choices,
        "can_edit": request.user.has_perm(EDIT),
    }
    template = "frontend/editor/_table.html" if _wants_partial(request) else "frontend/editor/list.html"
    return _answer(render(request, template, context))


# --- the editor -----------------------------------------------------------------------------------------------------


def _editor_context(request: HttpRequest, draft: preview.Draft, base: TemplateVersion | None, **extra) -> dict:
    """What the editor page and its partials need; ``extra`` may carry ``country``, ``audience``, errors."""
    country = extra.pop("country", None) or default_country(draft.language)
    audience = extra.pop("audience", None) or DEFAULT_AUDIENCE
    user = request.user
    built = preview.build(draft, country, audience)
    can_edit = user.has_perm(EDIT)
    shown_hash = draft.as_version().compute_content_hash()
    return {
        "draft": draft,
        "base": base,
        "preview": built,
        "mirror": highlight.mirror_html(built.runs, reverse("frontend:template-preview"), can_edit),
        "parts": CHANNEL_PARTS[draft.channel],
        "can_edit": can_edit,
        "can_approve": _may_approve(user, base, shown_hash),
        "shown_hash": shown_hash,
        "country": country,
        "audience": audience,
        "max_audience": MAX_AUDIENCE,
        **extra,
    }


def _may_approve(user, base: TemplateVersion | None, shown_hash: str) -> bool:
    """The approve button: the page shows exactly ``base`` and the action's rule lets ``user`` approve it."""
    if base is None or shown_hash != base.content_hash:
        return False
    return actions.approval_problem(base, user) is None


def _page(request: HttpRequest, context: dict, status: int = 200) -> HttpResponse:
    draft: preview.Draft = context["draft"]
    siblings = TemplateVersion.objects.filter(kind=draft.kind, language=draft.language, channel=draft.channel)
    base: TemplateVersion | None = context["base"]
    events = TemplateEvent.objects.filter(version__in=siblings).select_related("version")
    context = {
        **context,
        "history": list(siblings.select_related("created_by", "approved_by").order_by("-version")),
        "events": list(events[:_HISTORY_EVENTS]),
        "review_note": _review_note(base),
        "test_form": _test_form(request.user, base, context.get("test_values", {})),
        "kinds": Kind.objects.order_by("name"),
        "languages": language_choices(),
        "channels": Channel.choices,
        "countries": country_choices(),
    }
    return _answer(render(request, "frontend/editor/page.html", context, status=status))


def _review_note(base: TemplateVersion | None) -> TemplateEvent | None:
    """The reviewer's comment on a version sent back or rejected, which its writer reads on the page."""
    if base is None or base.status not in (TemplateVersion.Status.CHANGES, TemplateVersion.Status.REJECTED):
        return None
    decisions = (TemplateEvent.Action.CHANGES, TemplateEvent.Action.REJECT)
    return base.events.filter(action__in=decisions).order_by("-at", "-pk").first()


def _test_form(user, base: TemplateVersion | None, values: dict[str, str]) -> dict | None:
    """The "Send a test to me" form of a saved version, for who may send tests (else None).

    ``to`` is the member's own address, masked; ``problem`` says why there is none.
    Each declared param is a field: its example as the value, or what was typed;
    a secret param is a password field that starts empty whatever was typed.
    """
    if base is None or not send_to_self.may_send_tests(user):
        return None
    try:
        to, problem = send_to_self.masked_address(base.channel, send_to_self.own_address(user, base.channel)), ""
    except send_to_self.TestRefused as exc:
        to, problem = "", str(exc)
    secrets = masking.secret_names(base.kind)
    fields = [
        {
            "name": name,
            "secret": name in secrets,
            "value": "" if name in secrets else values.get(name, _typed_example(spec.get("example", ""))),
            "max_length": spec.get("max_length") or send_to_self.MAX_TYPED_CHARS,
        }
        for name, spec in base.kind.declared_params
    ]
    return {"to": to, "problem": problem, "fields": fields}


def _typed_example(example) -> str:
    """A kind's example as the test form shows it: text as is, a list as JSON (``send_to_self.checked_params``)."""
    return json.dumps(example, ensure_ascii=False) if isinstance(example, list) else str(example)


def _draft_of(version: TemplateVersion) -> preview.Draft:
    return preview.Draft(
        version.kind, version.language, version.channel, version.subject, version.text_body, version.html_body
    )


@require_GET
@staff_only(VIEW, EDIT)
def template_editor(request: HttpRequest) -> HttpResponse:
    """The editor for ``?kind=&language=&channel=``, starting from that template's newest version (if any).

    A value left out takes the default (the first kind, the kind's default
    language and channel); a value that names nothing is a 404 that says so,
    never silently another template.
    """
    kind, language, channel, unknown = _chosen_template(request)
    if unknown:
        return _not_a_template(request, unknown)
    if kind is None:
        messages.error(request, "There is no kind of notification yet: add one in the admin first.")
        return redirect("frontend:templates")
    base = (
        TemplateVersion.objects.filter(kind=kind, language=language, channel=channel)
        .select_related("kind", "created_by", "approved_by")
        .order_by("-version")
        .first()
    )
    draft = _draft_of(base) if base else preview.Draft(kind, language, channel)
    return _page(request, _editor_context(request, draft, base))


def _chosen_template(request: HttpRequest) -> tuple[Kind | None, str, str, list[str]]:
    """The kind, language and channel the query names (defaults for those left out) and what names nothing."""
    name, language, channel = (request.GET.get(field, "") for field in ("kind", "language", "channel"))
    unknown = []
    kind = Kind.objects.filter(name=name).first() if name and name.isprintable() else None
    if name and kind is None:
        unknown.append(f"There is no kind {_quoted(name)}.")
    kind = kind or (None if name else Kind.objects.order_by("name").first())
    if language and language.lower() not in dict(language_choices()):
        unknown.append(f"There is no language {_quoted(language)} here.")
    if channel and channel not in Channel.values:
        unknown.append(f"There is no channel {_quoted(channel)}: {', '.join(Channel.values)}.")
    language = language.lower() or (kind.default_language if kind else "")
    return kind, language, channel or (kind.default_channel if kind else ""), unknown


def _quoted(value: str) -> str:
    """A typed value quoted for a message: cut to 40 characters, unprintable ones as escapes."""
    return repr(value[:40]) if not value.isprintable() else f"“{value[:40]}”"


def _not_a_template(request: HttpRequest, problems: list[str]) -> HttpResponse:
    """404: the query named a kind, language or channel that does not exist; the picker offers those that do."""
    context = {"problems": problems, "kinds": Kind.objects.order_by("name"), "languages": language_choices(),
               "channels": Channel.choices}  # fmt: skip
    return _answer(render(request, "frontend/editor/not_a_template.html", context, status=404))


@require_GET
@staff_only(VIEW, EDIT)
def version_editor(request: HttpRequest, pk: int) -> HttpResponse:
    """The editor starting from one version; a draft shows the Approve button to approvers."""
    base = get_object_or_404(TemplateVersion.objects.select_related("kind", "created_by", "approved_by"), pk=pk)
    return _page(request, _editor_context(request, _draft_of(base), base))


def _bad_identity(request: HttpRequest, form: EditorForm) -> HttpResponse | None:
    """400 when the form does not name a template (a tampered or stale request), else None."""
    form.is_valid()
    errors = {name: form.errors[name] for name in _IDENTITY if name in form.errors}
    if not errors:
        return None
    text = "; ".join(f"{name}: {' '.join(messages_)}" for name, messages_ in errors.items())
    return _answer(HttpResponse(f"Not a template: {text}", status=400, content_type="text/plain; charset=utf-8"))


def _base_of(request: HttpRequest) -> TemplateVersion | None:
    pk = request.POST.get("base", "")
    if not (pk.isascii() and pk.isdigit()):  # "²" and "٣" are digits to str.isdigit, not to int(): a 500
        return None
    return TemplateVersion.objects.select_related("kind", "created_by", "approved_by").filter(pk=pk).first()


@require_POST
@staff_only(VIEW, EDIT)
def template_preview(request: HttpRequest) -> HttpResponse:
    """The live panel as the author types (HTMX), or the whole page without JavaScript.

    With ``fix`` (a look-alike button), the text body comes back fixed too: the
    partial then also replaces the textarea. A template that does not render is
    an error in the panel, answered 200 so that HTMX shows it.
    """
    form = EditorForm(request.POST)
    if (bad := _bad_identity(request, form)) is not None:
        return bad
    draft = form.draft() if form.is_valid() else _lenient_draft(form)
    fixed = False
    if request.POST.get("fix") and request.user.has_perm(EDIT):
        draft = replace(draft, text_body=preview.apply_fix(draft.text_body, request.POST["fix"]))
        fixed = True
    country, audience = _pricing_inputs(form, draft)
    extra = {"country": country, "audience": audience, "input_errors": _input_errors(form), "fixed": fixed}
    context = _editor_context(request, draft, _base_of(request), **extra)
    if _wants_partial(request):
        return _answer(render(request, "frontend/editor/_panel.html", context))
    return _page(request, context)


def _lenient_draft(form: EditorForm) -> preview.Draft:
    """The draft from a form whose identity is valid but another field is not: texts cut to their maximum."""
    data = form.cleaned_data
    raw = {
        name: form.fields[name].to_python(form.data.get(name, ""))[: form.fields[name].max_length]
        for name in ("subject", "text_body", "html_body")
    }
    return preview.Draft(data["kind"], data["language"], data["channel"], **raw)


def _pricing_inputs(form: EditorForm, draft: preview.Draft) -> tuple[str, int]:
    data = form.cleaned_data
    return data.get("country") or default_country(draft.language), data.get("audience") or DEFAULT_AUDIENCE


def _input_errors(form: EditorForm) -> list[str]:
    labels = {"country": "Country", "audience": "Audience size", "subject": "Subject", "text_body": "Text"}
    return [f"{labels.get(name, name)}: {' '.join(errors)}" for name, errors in form.errors.items()]


@require_POST
@staff_only(EDIT)
def template_save(request: HttpRequest) -> HttpResponse:
    """Save the form as the next draft version of its template, then show that version."""
    form = EditorForm(request.POST, for_save=True)
    if (bad := _bad_identity(request, form)) is not None:
        return bad
    if not form.is_valid():
        draft = _lenient_draft(form)
        country, audience = _pricing_inputs(form, draft)
        context = _editor_context(
            request, draft, _base_of(request), country=country, audience=audience, input_errors=_input_errors(form)
        )
        return _page(request, context, status=400)
    draft = form.draft()
    version = actions.save_template_draft(
        draft.kind, draft.language, draft.channel, request.user,
        subject=draft.subject, text_body=draft.text_body, html_body=draft.html_body,
    )  # fmt: skip
    messages.success(request, f"Saved {version} as a draft. It is sent only once someone else approves it.")
    return redirect("frontend:template-version", pk=version.pk)


@require_POST
@staff_only(VIEW, EDIT)
def template_approve(request: HttpRequest, pk: int) -> HttpResponse:
    """Approve a draft as the page showed it (``content_hash``) by ``actions.approve_template``.

    A refusal is shown on the page: 400 without a content hash, 409 when the
    version is not the content shown, 403 for the rule (own draft, no permission).
    """
    version = get_object_or_404(TemplateVersion.objects.select_related("kind", "created_by", "approved_by"), pk=pk)
    shown_hash = request.POST.get("content_hash", "")
    if not _SHA256.fullmatch(shown_hash):
        error = "The approval names no content hash: approve from the version's page."
        return _page(request, _editor_context(request, _draft_of(version), version, error=error), status=400)
    try:
        actions.approve_template(version, request.user, shown_hash)
    except actions.ApprovalRefused as exc:
        status = 409 if isinstance(exc, actions.ContentChanged) else 403
        return _page(request, _editor_context(request, _draft_of(version), version, error=str(exc)), status=status)
    messages.success(request, f"Approved {version}.")
    return redirect("frontend:template-version", pk=version.pk)
