"""The approvers' side of the editor: what waits for approval, a draft against the version in use, and "no".

``awaiting`` lists the drafts waiting (the newest version of a template, when
it is a draft); the navigation shows how many wait for the person looking
(``waiting_for``: not their own). ``review`` shows a version side by side with
the version in use (``diff.compare``), with Approve (``views.template_approve``)
and Request changes / Reject (``decide`` → ``actions.review_template``, which
holds the rule: the admin is no exception). Who may do what is decided here and
in the action, never by an ``{% if %}`` alone.
"""

from django.contrib import messages
from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from backend.notifications import actions, rendering
from backend.notifications.actions.templates import APPROVE, comment_problem, review_problem
from backend.notifications.models import Channel, TemplateEvent, TemplateVersion
from backend.notifications.models.template_history import MAX_COMMENT_CHARS
from frontend.editor import diff, preview
from frontend.editor.views import EDIT, VIEW, _answer, staff_only

_DECISIONS = {"changes": TemplateEvent.Action.CHANGES, "reject": TemplateEvent.Action.REJECT}


_SAME_TEMPLATE = {"kind": OuterRef("kind"), "language": OuterRef("language"), "channel": OuterRef("channel")}


def _newest_drafts() -> QuerySet[TemplateVersion]:
    """Drafts that are the newest version of their template (a newer save supersedes them)."""
    newer = TemplateVersion.objects.filter(**_SAME_TEMPLATE, version__gt=OuterRef("version"))
    return TemplateVersion.objects.filter(status=TemplateVersion.Status.DRAFT).exclude(Exists(newer))


def awaiting_drafts() -> QuerySet[TemplateVersion]:
    """Drafts waiting for approval, oldest first, each with ``live_version``: the number of the version in use."""
    live = TemplateVersion.objects.filter(**_SAME_TEMPLATE, status=TemplateVersion.Status.APPROVED).order_by("-version")
    return (
        _newest_drafts()
        .annotate(live_version=Subquery(live.values("version")[:1]))
        .select_related("kind", "created_by")
        .order_by("created_at", "pk")
    )


def waiting_for(user) -> QuerySet[TemplateVersion]:
    """The drafts ``user`` could approve: waiting, and written by someone else who is known (two-person rule)."""
    return _newest_drafts().exclude(created_by=None).exclude(created_by=user.pk)


def live_version(version: TemplateVersion) -> TemplateVersion | None:
    """The version now sent for ``version``'s kind × language × channel: its newest approved one, or None."""
    approved = TemplateVersion.objects.filter(
        kind=version.kind_id, language=version.language, channel=version.channel, status=TemplateVersion.Status.APPROVED
    )
    return approved.select_related("approved_by").order_by("-version").first()


@require_GET
@staff_only(APPROVE)
def awaiting(request: HttpRequest) -> HttpResponse:
    """Every draft waiting for approval, oldest first: first those the approver may approve, then their own."""
    drafts = list(awaiting_drafts())
    mine = [draft for draft in drafts if draft.created_by_id == request.user.pk]
    context = {
        "for_you": [draft for draft in drafts if draft.created_by_id not in (None, request.user.pk)],
        "mine": mine,
        "orphans": [draft for draft in drafts if draft.created_by_id is None],
    }
    return _answer(render(request, "frontend/editor/awaiting.html", context))


def sms_segments(version: TemplateVersion) -> preview.SmsMeasure | rendering.RenderError:
    """``version``'s SMS with the kind's example params and at worst (``preview.measure_sms``), or why it failed."""
    try:
        return preview.measure_sms(version, rendering.example_params(version.kind))
    except rendering.RenderError as exc:
        return exc


def approval_changes(version: TemplateVersion) -> dict:
    """What approving ``version`` changes for the kind's callers, beside its text.

    ``replaced`` is what sends of its kind × language × channel use today (``rendering.select_version``:
    the live version, else the default language's), None if nothing. ``new_params`` are the params
    ``version`` requires (``rendering.required_params``) that ``replaced`` does not: once approved, a
    caller that leaves one out gets a 422. For SMS, ``segments`` and ``replaced_segments`` compare
    the price of one message (``sms_segments``), or ``segments_error`` says why the draft's could not be measured.
    """
    replaced = rendering.select_version(version.kind, version.channel, version.language)
    if replaced is not None and replaced.pk == version.pk:
        replaced = None
    before = set(rendering.required_params(replaced)) if replaced is not None else set()
    changes = {"replaced": replaced, "new_params": sorted(set(rendering.required_params(version)) - before)}
    if version.channel == Channel.SMS:
        measured = sms_segments(version)
        if isinstance(measured, rendering.RenderError):
            changes["segments_error"] = str(measured)
        else:
            changes["segments"] = measured
            before = sms_segments(replaced) if replaced is not None else None
            changes["replaced_segments"] = before if isinstance(before, preview.SmsMeasure) else None
    return changes


def earlier_reviews(version: TemplateVersion, live: TemplateVersion | None) -> list[TemplateEvent]:
    """What reviewers asked of the earlier drafts of ``version``'s template since the version in use, newest first.

    A reviewer of v3 sees that v2 was sent back "the price must say SAR" and can check that v3 does
    it, without opening v2. Only changes requested and rejections, each with its comment.
    """
    since = live.version if live is not None and live.version < version.version else 0
    return list(
        TemplateEvent.objects.filter(
            version__kind=version.kind_id, version__language=version.language, version__channel=version.channel,
            version__version__gt=since, version__version__lt=version.version,
            action__in=[TemplateEvent.Action.CHANGES, TemplateEvent.Action.REJECT],
        ).select_related("version")
    )  # fmt: skip


def _review_context(request: HttpRequest, version: TemplateVersion, **extra) -> dict:
    live = live_version(version)
    user = request.user
    approve_problem = actions.approval_problem(version, user)
    return {
        "version": version,
        "live": live,
        "changes": approval_changes(version) if version.status == TemplateVersion.Status.DRAFT else {},
        "parts": diff.compare(live if live and live.pk != version.pk else None, version),
        "is_live": live is not None and live.pk == version.pk,
        "can_approve": approve_problem is None,
        "approve_problem": approve_problem,
        "can_review": review_problem(version, user) is None,
        "events": list(version.events.select_related("version")),
        "earlier_reviews": earlier_reviews(version, live),
        "max_comment": MAX_COMMENT_CHARS,
        "comment": "",
        **extra,
    }


def _version(pk: int) -> TemplateVersion:
    return get_object_or_404(TemplateVersion.objects.select_related("kind", "created_by", "approved_by"), pk=pk)


@require_GET
@staff_only(VIEW, EDIT)
def review(request: HttpRequest, pk: int) -> HttpResponse:
    """A version side by side with the version in use; Approve, Request changes and Reject for who may."""
    return _answer(render(request, "frontend/editor/review.html", _review_context(request, _version(pk))))


@require_POST
@staff_only(APPROVE)
def decide(request: HttpRequest, pk: int) -> HttpResponse:
    """Request changes to a draft or reject it, with a comment its writer sees (``actions.review_template``).

    A refusal is the review page with the reason: 400 for a missing or too long
    comment or an unknown decision, 403 for the rule (own draft, not a draft).
    """
    version = _version(pk)
    decision = _DECISIONS.get(request.POST.get("decision", ""))
    comment = request.POST.get("comment", "").replace("\r\n", "\n")
    problem = comment_problem(comment) if decision else "Choose: request changes or reject."
    if problem:
        context = _review_context(request, version, error=problem, comment=comment[:MAX_COMMENT_CHARS])
        return _answer(render(request, "frontend/editor/review.html", context, status=400))
    try:
        actions.review_template(version, request.user, decision, comment)
    except actions.ApprovalRefused as exc:
        context = _review_context(request, version, error=str(exc), comment=comment)
        return _answer(render(request, "frontend/editor/review.html", context, status=403))
    verb = "Requested changes to" if decision == TemplateEvent.Action.CHANGES else "Rejected"
    messages.success(request, f"{verb} {version}; its writer sees your comment on the draft.")
    return redirect("frontend:templates-awaiting")
