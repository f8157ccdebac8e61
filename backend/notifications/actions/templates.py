"""Template versions: every save is a new, immutable version; a second person approves the content they saw,
or sends it back with a comment. Each action writes a ``TemplateEvent`` (the history and audit) in its transaction.
"""

from django.db import transaction
from django.utils import timezone

from backend.notifications import rendering
from backend.notifications.models import (
    Kind,
    TemplateEvent,
    TemplateVersion,
)
from backend.notifications.models.template_history import MAX_COMMENT_CHARS

APPROVE = "notifications.approve_templateversion"
# A reviewer's "no": the version's new status for each review decision.
REVIEW_OUTCOMES = {
    TemplateEvent.Action.CHANGES: TemplateVersion.Status.CHANGES,
    TemplateEvent.Action.REJECT: TemplateVersion.Status.REJECTED,
}


class ApprovalRefused(Exception):
    """A template version cannot be saved or approved; the message says why."""


class ContentChanged(ApprovalRefused):
    """The approver was shown other content than the version holds (a 409: look again, then approve)."""


def save_template_draft(
    kind: Kind, language: str, channel: str, author, subject: str = "", text_body: str = "", html_body: str = ""
) -> TemplateVersion:
    """Store a new draft: version max+1 of its kind × language × channel, written by ``author``.

    Every save is a new version; an approved one is never edited. The HTML
    body is sanitized (bleach allow-list) before it is stored. Two saves at
    once must not both take max+1: the kind's row is locked first (``FOR NO
    KEY UPDATE``, which does not block notifications that merely reference the
    kind), so numbering is serialized per kind.
    """
    for part in (subject, text_body, html_body):
        problem = rendering.message_text_problem(part)
        if problem:
            raise ApprovalRefused(problem)
    # What is stored: the sanitizer decodes entities, so &#x202E; is the override itself now.
    html_body = rendering.sanitize_html(html_body)
    problem = rendering.message_text_problem(html_body)
    if problem:
        raise ApprovalRefused(problem)
    with transaction.atomic():
        Kind.objects.select_for_update(no_key=True).only("pk").get(pk=kind.pk)
        siblings = TemplateVersion.objects.filter(kind=kind, language=language, channel=channel)
        latest = max(siblings.values_list("version", flat=True), default=0)
        version = TemplateVersion.objects.create(
            kind=kind, language=language, channel=channel, version=latest + 1, status=TemplateVersion.Status.DRAFT,
            subject=subject, text_body=text_body, html_body=html_body, created_by=author,
        )  # fmt: skip
        record_event(version, author, TemplateEvent.Action.SAVE, detail={"content_hash": version.content_hash})
    return version


def record_event(
    version: TemplateVersion, actor, action: str, comment: str = "", detail: dict | None = None
) -> TemplateEvent:
    """Write one ``TemplateEvent`` (history and audit) of ``actor`` on ``version``; returns it."""
    return TemplateEvent.objects.create(
        version=version, actor=actor, actor_name=actor.get_username() if actor else "", action=action,
        comment=comment, detail=detail or {},
    )  # fmt: skip


def approval_problem(version: TemplateVersion, user) -> str | None:
    """Why ``user`` may not approve ``version`` now, or None when they may.

    The rule: a draft, approved by someone with the approve permission who is
    not its author (two-person rule), and only when it renders with the kind's
    example params. The editor page asks this before showing the approve button.
    """
    problem = _second_person_problem(version, user, "approve")
    if problem:
        return problem
    examples = {name: spec["example"] for name, spec in version.kind.params.items() if "example" in spec}
    try:
        rendering.render(version, examples)
    except rendering.RenderError as exc:
        # Approving it would break every send of this kind in this language and channel.
        return f"{version} does not render with the kind's example params: {exc}"
    return None


def _second_person_problem(version: TemplateVersion, user, verb: str) -> str | None:
    """The rule approving and reviewing share: the approve permission, someone else's draft, still a draft.

    A superuser holds every permission but is no exception to the rest: the admin
    never approves or rejects their own draft.
    """
    if not (user.is_active and user.has_perm(APPROVE)):
        return f"{user.get_username()} may not {verb} templates."
    if version.created_by_id is None:
        # Its writer's account is gone: nobody can show that the reviewer is a second person.
        return f"{version} has no known author; save it again as a new draft for a second person to {verb}."
    if version.created_by_id == user.pk:
        return f"{version} was written by {user.get_username()}: a second person must {verb} it."
    if version.status != TemplateVersion.Status.DRAFT:
        return f"{version} is {version.get_status_display().lower()}, not a draft waiting for approval."
    return None


def review_problem(version: TemplateVersion, user) -> str | None:
    """Why ``user`` may not send ``version`` back or reject it now, or None when they may (same rule as approval)."""
    return _second_person_problem(version, user, "review")


def comment_problem(comment: str) -> str | None:
    """Why ``comment`` cannot go with a review, or None: it must say something, in at most ``MAX_COMMENT_CHARS``."""
    if not comment.strip():
        return "Write a comment: the writer needs to know what to change."
    if len(comment) > MAX_COMMENT_CHARS:
        return f"The comment may be at most {MAX_COMMENT_CHARS} characters (it has {len(comment)})."
    return rendering.text_problem(comment) or None


def review_template(version: TemplateVersion, user, decision: str, comment: str) -> None:
    """Send a draft back to its writer (``TemplateEvent.Action.CHANGES``) or reject it (``REJECT``), with a comment.

    The version's row is locked and the rule (``review_problem``) checked against
    what is stored; the status changes by a conditional UPDATE, and the event with
    the comment is written in the same transaction. The version itself never
    changes: the writer saves a new draft. Raises ``ApprovalRefused``.
    """
    if decision not in REVIEW_OUTCOMES:
        raise ApprovalRefused(f"Unknown review decision {decision!r}: request changes or reject.")
    problem = comment_problem(comment)
    if problem:
        raise ApprovalRefused(problem)
    with transaction.atomic():
        current = TemplateVersion.objects.select_for_update(no_key=True).select_related("kind").get(pk=version.pk)
        problem = review_problem(current, user)
        if problem:
            raise ApprovalRefused(problem)
        TemplateVersion.objects.filter(pk=current.pk, status=TemplateVersion.Status.DRAFT).update(
            status=REVIEW_OUTCOMES[decision]
        )
        record_event(current, user, decision, comment=comment.strip())


def approve_template(version: TemplateVersion, user, shown_hash: str) -> None:
    """Approve a draft as shown to ``user``: ``shown_hash`` is the content hash of the page they approved from.

    The version's row is locked, so the rule (``approval_problem``) and the hash
    are checked against what is stored when it is approved. Raises
    ``ApprovalRefused``, or ``ContentChanged`` when the stored content is not the
    content shown (the two-person rule would otherwise cover text its second
    person never read).
    """
    with transaction.atomic():
        current = TemplateVersion.objects.select_for_update(no_key=True).select_related("kind").get(pk=version.pk)
        problem = approval_problem(current, user)
        if problem:
            raise ApprovalRefused(problem)
        stored = current.compute_content_hash()
        if shown_hash != stored or current.content_hash != stored:
            raise ContentChanged(
                f"{current} is not the text you were shown (content hash {shown_hash[:12]}…, it has "
                f"{stored[:12]}…): open it again, read it, and approve what it says now."
            )
        TemplateVersion.objects.filter(pk=current.pk).update(
            status=TemplateVersion.Status.APPROVED, approved_by=user, approved_at=timezone.now()
        )
        record_event(current, user, TemplateEvent.Action.APPROVE, detail={"content_hash": stored})
