"""Template versions: drafts are saved as new versions and approved by a second person."""

from django.db import transaction
from django.utils import timezone

from backend.notifications import rendering
from backend.notifications.models import (
    Kind,
    TemplateVersion,
)


class ApprovalRefused(Exception):
    """A template version cannot be saved or approved; the message says why."""


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
        problem = rendering.text_problem(part)
        if problem:
            raise ApprovalRefused(problem)
    with transaction.atomic():
        Kind.objects.select_for_update(no_key=True).only("pk").get(pk=kind.pk)
        siblings = TemplateVersion.objects.filter(kind=kind, language=language, channel=channel)
        latest = max(siblings.values_list("version", flat=True), default=0)
        return TemplateVersion.objects.create(
            kind=kind, language=language, channel=channel, version=latest + 1, status=TemplateVersion.Status.DRAFT,
            subject=subject, text_body=text_body, html_body=rendering.sanitize_html(html_body), created_by=author,
        )  # fmt: skip


def approve_template(version: TemplateVersion, user) -> None:
    """Approve a draft: only with the approve permission, never by its author (two-person rule).

    Raises ``ApprovalRefused``.
    """
    if not user.has_perm("notifications.approve_templateversion"):
        raise ApprovalRefused(f"{user.get_username()} may not approve templates.")
    if version.created_by_id is not None and version.created_by_id == user.pk:
        raise ApprovalRefused(f"{version} was written by {user.get_username()}: a second person must approve it.")
    examples = {name: spec["example"] for name, spec in version.kind.params.items() if "example" in spec}
    try:
        rendering.render(version, examples)
    except rendering.RenderError as exc:
        # Approving it would break every send of this kind in this language and channel.
        raise ApprovalRefused(f"{version} does not render with the kind's example params: {exc}") from exc
    updated = TemplateVersion.objects.filter(pk=version.pk, status=TemplateVersion.Status.DRAFT).update(
        status=TemplateVersion.Status.APPROVED, approved_by=user, approved_at=timezone.now()
    )
    if not updated:
        raise ApprovalRefused(f"{version} is already approved.")
