"""Every state change of a campaign: permission-checked, atomic, and written to ``CampaignAudit``.

The two-person rule lives here and nowhere else (not in a view, a form or the admin):
a campaign is approved or rejected by a user with ``campaigns.approve_campaign`` who
neither wrote, edited nor submitted it — superusers included — naming the content hash
they were shown (``content_hash.py``). Any edit after submit voids the submission and
any approval: the campaign returns to draft and its audit says why. An API client may
create drafts, never approve (DESIGN.md §5).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from backend.notifications import idempotency
from backend.notifications.models import ApiClient, Category, Kind, Notification, Recipient, State, TemplateVersion
from backend.notifications.rendering import RenderError
from campaigns import ledger, pacing
from campaigns.audience import Audience, AudienceUnavailable, audience
from campaigns.content_hash import campaign_hash
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, Origin, ScheduleMode, Segment, SegmentMember
from campaigns.preflight import preflight

Actor = AbstractBaseUser | ApiClient

# What an author may set; anything else (state, hash, author) only the actions below change.
EDITABLE_FIELDS = (
    "name", "kind", "channel", "template_versions", "params", "segment", "schedule_mode", "send_at",
    "local_time", "end_at", "correction_version", "correction_none_reason", "spread_seconds", "spread_until",
    "rate_per_second", "sending_hours_start", "sending_hours_end",
)  # fmt: skip
EDITABLE_STATES = {Campaign.State.DRAFT, Campaign.State.SUBMITTED, Campaign.State.APPROVED, Campaign.State.REJECTED}
FINAL_STATES = {Campaign.State.CANCELLED, Campaign.State.DONE}
# Characters of an approver's comment.
MAX_COMMENT = 2_000
# Rows without a task that ``cancel`` writes ``cancelled`` after its commit (~0.5 s); the scheduler does the rest.
CANCEL_CHUNK = 10_000
# Audit actions that make a user a writer of the campaign, and so never its approver.
WRITING_ACTIONS = (CampaignAudit.Action.CREATE, CampaignAudit.Action.EDIT, CampaignAudit.Action.SUBMIT)
SECURITY_REFUSED = "security kinds cannot be sent as a campaign"
DIGEST_REFUSED = "the digest gathers what a rate limit held back for one person, and is no campaign's kind"
UNKNOWN_IDS_SHOWN = 20


class CampaignRefused(Exception):
    """An action is refused; ``message`` says why, ``field`` names the input at fault (or "body").

    ``status`` is the HTTP status a view answers it with.
    """

    status = 422

    def __init__(self, message: str, field: str = "body"):
        super().__init__(message)
        self.message = message
        self.field = field


class PermissionRefused(CampaignRefused):
    """The actor may not do this to this campaign (403)."""

    status = 403


class ContentChanged(CampaignRefused):
    """The approver was shown other content than the campaign holds now (409: look again, then decide)."""

    status = 409


class IdempotencyConflict(CampaignRefused):
    """An Idempotency-Key already named a different campaign request (422)."""


@dataclass(frozen=True)
class Created:
    """What ``create_draft`` made, or the original draft of a repeated idempotency key (``duplicate``)."""

    campaign: Campaign
    duplicate: bool


def _actor_name(actor: Actor) -> str:
    return f"api:{actor.name}" if isinstance(actor, ApiClient) else actor.get_username()


def _audit(campaign: Campaign, actor: Actor, action: str, **detail: Any) -> None:
    CampaignAudit.objects.create(
        campaign=campaign,
        actor=None if isinstance(actor, ApiClient) else actor,
        actor_name=_actor_name(actor),
        action=action,
        content_hash=campaign.content_hash,
        detail=detail,
    )


def _require(user: AbstractBaseUser, codename: str, doing: str) -> None:
    if not user.has_perm(f"campaigns.{codename}"):
        raise PermissionRefused(f"{user.get_username()} may not {doing}.")


def _locked(campaign: Campaign) -> Campaign:
    return Campaign.objects.select_for_update(no_key=True).select_related("kind", "segment").get(pk=campaign.pk)


# --- what a campaign must be ---------------------------------------------------------------------


def _kind_problem(campaign: Campaign) -> tuple[str, str] | None:
    kind = campaign.kind
    if kind.category == Category.SECURITY:
        return "kind", f"{kind.name}: {SECURITY_REFUSED}"
    if kind.category not in (Category.MARKETING, Category.TRANSACTIONAL):
        return "kind", f"{kind.name}: only marketing and transactional kinds can be sent as a campaign."
    if kind.name == Kind.DIGEST:
        # Its template lists the messages a rate limit held back for one person: a campaign has none to list.
        return "kind", f"{kind.name}: {DIGEST_REFUSED}."
    if campaign.channel not in kind.channels:
        return "channel", f"{kind.name} is sent on {', '.join(kind.channels)}, not {campaign.channel}."
    return None


INSTANT_NAMES = {"send_at": "The send time (send_at)", "end_at": "The end time (end_at)"}


def _utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _instant_problem(name: str, value: datetime | None, now: datetime) -> str | None:
    if value is None:
        return None
    if timezone.is_naive(value):
        return f"{INSTANT_NAMES[name]} needs a time zone (e.g. 2026-12-01T09:00:00Z)."
    if value <= now:
        return f"{INSTANT_NAMES[name]} {_utc_text(value)} is in the past: pick a time after {_utc_text(now)}."
    return None


def _schedule_problem(campaign: Campaign, now: datetime) -> tuple[str, str] | None:
    mode = campaign.schedule_mode
    if mode not in ScheduleMode.values:
        return "schedule.mode", f"Unknown schedule {mode!r}: one of {', '.join(ScheduleMode.values)}."
    if mode == ScheduleMode.AT and campaign.send_at is None:
        return "schedule.send_at", 'A schedule "at" needs send_at, an instant with its time zone.'
    if mode == ScheduleMode.LOCAL_TIME and campaign.local_time is None:
        return "schedule.local_time", 'A schedule "local_time" needs local_time, a wall time such as 09:00.'
    if mode != ScheduleMode.AT and campaign.send_at is not None:
        return "schedule.send_at", f'send_at belongs to a schedule "at", not "{mode}".'
    if mode != ScheduleMode.LOCAL_TIME and campaign.local_time is not None:
        return "schedule.local_time", f'local_time belongs to a schedule "local_time", not "{mode}".'
    for name in ("send_at", "end_at"):
        problem = _instant_problem(name, getattr(campaign, name), now)
        if problem:
            return (f"schedule.{name}" if name == "send_at" else name), problem
    if campaign.end_at and campaign.send_at and campaign.end_at <= campaign.send_at:
        return "end_at", "The end time (end_at) must come after the send time (send_at): nothing would be sent."
    return None


def _version_problem(version_id: Any, campaign: Campaign, language: str | None) -> str | None:
    version = TemplateVersion.objects.filter(pk=version_id).first() if isinstance(version_id, int) else None
    if version is None:
        return f"No template version with id {version_id!r}."
    if version.status != TemplateVersion.Status.APPROVED:
        return f"{version} is not approved: only approved versions are sent."
    if version.channel != campaign.channel:
        return f"{version} is for {version.channel}, the campaign sends on {campaign.channel}."
    if language is not None and (version.kind_id != campaign.kind_id or version.language != language):
        return f"{version} is not the {campaign.kind.name} template in {language!r}."
    return None


def _templates_problem(campaign: Campaign) -> tuple[str, str] | None:
    if not isinstance(campaign.template_versions, dict):
        return "template_versions", 'An object of language → version id, e.g. {"en": 12}.'
    for language, version_id in sorted(campaign.template_versions.items()):
        problem = _version_problem(version_id, campaign, language)
        if problem:
            return f"template_versions.{language}", problem
    return None


def _correction_problem(campaign: Campaign, *, complete: bool) -> tuple[str, str] | None:
    version_id, reason = campaign.correction_version_id, campaign.correction_none_reason.strip()
    if version_id is not None and reason:
        return "correction", "Name a correction template or a reason for having none, not both."
    if version_id is not None:
        problem = _version_problem(version_id, campaign, None)
        if problem is None:
            # A correction goes to the same people as a campaign of this kind: never a security kind (an OTP
            # sent to a segment), and the campaign's own category (a marketing campaign is corrected by marketing).
            version = TemplateVersion.objects.select_related("kind").get(pk=version_id)
            wanted = campaign.kind.category
            if version.kind.category != wanted or wanted not in (Category.MARKETING, Category.TRANSACTIONAL):
                problem = (
                    f"{version}: {version.kind.name} is a {version.kind.category} kind: a correction is a {wanted} "
                    f"template, like the campaign's {campaign.kind.name}."
                )
        return ("correction.template_version", problem) if problem else None
    if complete and not reason:
        return "correction", (
            "Name a correction template version (ready to send if this campaign goes wrong), or say why there is none."
        )
    return None


def _draft_problem(campaign: Campaign, now: datetime) -> tuple[str, str] | None:
    """What makes ``campaign`` unfit to be saved even as a draft."""
    return (
        _kind_problem(campaign)
        or _schedule_problem(campaign, now)
        or pacing.pacing_problem(campaign, now)
        or _templates_problem(campaign)
        or _correction_problem(campaign, complete=False)
    )


def _refuse_if(problem: tuple[str, str] | None) -> None:
    if problem:
        field, message = problem
        raise CampaignRefused(message, field)


def resolved_templates(campaign: Campaign) -> dict[str, int]:
    """The author's chosen versions, or the newest approved version per language of kind × channel.

    Raises ``CampaignRefused`` (field ``channel``) when the kind has no approved template on the channel.
    """
    if campaign.template_versions:
        return campaign.template_versions
    newest: dict[str, int] = {}
    approved = TemplateVersion.objects.filter(
        kind=campaign.kind, channel=campaign.channel, status=TemplateVersion.Status.APPROVED
    ).order_by("language", "-version")
    for language, version_id in approved.values_list("language", "id"):
        newest.setdefault(language, version_id)
    if not newest:
        raise CampaignRefused(
            f"{campaign.kind.name} has no approved template on {campaign.channel}: approve one first.", "channel"
        )
    return newest


# --- segments ------------------------------------------------------------------------------------


def create_list_segment(actor: Actor, name: str, user_ids: Iterable[str]) -> Segment:
    """A list segment of the users ``user_ids`` (duplicates collapsed).

    Raises ``CampaignRefused`` (field ``user_ids``) for an empty list or unknown ids,
    naming the first ``UNKNOWN_IDS_SHOWN`` of them. Call inside the caller's transaction.
    """
    wanted = sorted(set(user_ids))
    if not wanted:
        raise CampaignRefused("List at least one user id.", "user_ids")
    found = dict(Recipient.objects.filter(user_id__in=wanted).values_list("user_id", "pk"))
    unknown = [user_id for user_id in wanted if user_id not in found]
    if unknown:
        shown = ", ".join(unknown[:UNKNOWN_IDS_SHOWN]) + (" …" if len(unknown) > UNKNOWN_IDS_SHOWN else "")
        raise CampaignRefused(f"{len(unknown)} unknown user id(s): {shown}", "user_ids")
    client = actor if isinstance(actor, ApiClient) else None
    segment = Segment.objects.create(
        name=name, kind=Segment.Kind.LIST, created_by=None if client else actor, client=client
    )
    SegmentMember.objects.bulk_create(SegmentMember(segment=segment, recipient_id=pk) for pk in found.values())
    return segment


def _refuse_unknown_fields(fields: dict[str, Any]) -> None:
    unknown = sorted(set(fields) - set(EDITABLE_FIELDS))
    if unknown:
        raise CampaignRefused(f"These fields cannot be set: {', '.join(unknown)}.", unknown[0])


# --- the lifecycle -------------------------------------------------------------------------------


def create_draft(
    actor: Actor,
    *,
    user_ids: list[str] | None = None,
    idempotency_key: str = "",
    payload: dict[str, Any] | None = None,
    **fields: Any,
) -> Created:
    """Save a new draft from ``fields`` (``EDITABLE_FIELDS``); ``user_ids`` instead of ``segment`` makes a list segment.

    A staff user needs ``campaigns.add_campaign``; an API client may always create drafts.
    With an ``idempotency_key`` (API clients), a repeated key answers the original draft
    when ``payload`` is the same request, and raises ``IdempotencyConflict`` when it is not.
    Raises ``CampaignRefused`` for a security kind, a channel the kind lacks, a past or
    incomplete schedule, an unknown or unapproved template, unknown user ids.
    """
    if not isinstance(actor, ApiClient):
        _require(actor, "add_campaign", "create campaigns")
        if idempotency_key:
            raise CampaignRefused("Idempotency keys are scoped to an API client; staff pages send none.", "body")
    _refuse_unknown_fields(fields)
    if idempotency_key:
        original = _original(actor, idempotency_key, payload or {})
        if original:
            return Created(original, duplicate=True)
    try:
        with transaction.atomic():
            campaign = _new_draft(actor, fields, user_ids, idempotency_key, payload or {})
    except IntegrityError:
        original = _original(actor, idempotency_key, payload or {}) if idempotency_key else None
        if original is None:
            raise
        return Created(original, duplicate=True)  # a concurrent request with the same key won
    return Created(campaign, duplicate=False)


def _original(client: ApiClient, key: str, payload: dict[str, Any]) -> Campaign | None:
    original = Campaign.objects.filter(client=client, idempotency_key=key).first()
    if original and not idempotency.same_request(original.request_hash, payload):
        raise IdempotencyConflict(
            f"This Idempotency-Key already created campaign {original.pk} with a different request; "
            "use a new key for a new campaign.",
            "Idempotency-Key",
        )
    return original


def _new_draft(actor: Actor, fields: dict, user_ids: list[str] | None, key: str, payload: dict) -> Campaign:
    if (user_ids is None) == ("segment" not in fields):
        raise CampaignRefused("Name either a segment id or a list of user_ids.", "segment")
    is_client = isinstance(actor, ApiClient)
    campaign = Campaign(
        **fields,
        author=None if is_client else actor,
        client=actor if is_client else None,
        idempotency_key=key,
        request_hash=idempotency.request_hash(payload) if key else "",
    )
    _refuse_if(_draft_problem(campaign, timezone.now()))
    if user_ids is not None:
        campaign.segment = create_list_segment(actor, f"{campaign.name} (list)", user_ids)
    campaign.save()
    _audit(campaign, actor, CampaignAudit.Action.CREATE, fields=sorted({*fields, *(["user_ids"] if user_ids else [])}))
    return campaign


def edit(campaign: Campaign, user: AbstractBaseUser, **changes: Any) -> Campaign:
    """Change ``changes`` (``EDITABLE_FIELDS``) of a campaign not yet scheduled; returns it as stored.

    An edit of a submitted, approved or rejected campaign returns it to draft: its
    frozen hash is cleared, its approvals are voided (``voided_at``), and the audit row
    names the fields changed and why the state went back. An edit that changes nothing
    is not recorded. Needs ``campaigns.change_campaign``; raises ``CampaignRefused``.
    """
    _require(user, "change_campaign", "edit campaigns")
    _refuse_unknown_fields(changes)
    with transaction.atomic():
        current = _locked(campaign)
        if current.state not in EDITABLE_STATES:
            raise CampaignRefused(f"{current} is {current.state}: it can no longer be edited.", "state")
        changed = [name for name, value in changes.items() if getattr(current, name) != value]
        if not changed:
            return current
        for name in changed:
            setattr(current, name, changes[name])
        _refuse_if(_draft_problem(current, timezone.now()))
        detail: dict[str, Any] = {"changed": sorted(changed), "from_state": current.state}
        if current.state != Campaign.State.DRAFT:
            detail["reason"] = _void(current, f"edited while {current.state} ({', '.join(sorted(changed))} changed)")
        current.save()
        _audit(current, user, CampaignAudit.Action.EDIT, **detail)
    return current


def _void(campaign: Campaign, why: str) -> str:
    """Return ``campaign`` (locked, saved by the caller) to draft, voiding its submission and approvals."""
    reason = f"Back to draft: {why}; the submission of {campaign.content_hash[:12]}… and any approval of it are void."
    CampaignApproval.objects.filter(campaign=campaign, voided_at__isnull=True).update(voided_at=timezone.now())
    campaign.state, campaign.content_hash, campaign.submitted_at = Campaign.State.DRAFT, "", None
    campaign.preflight = {}
    return reason


def submit(campaign: Campaign, user: AbstractBaseUser) -> Campaign:
    """Freeze a draft's content hash and ask for a second person's approval; returns it as stored.

    Resolves the template versions when the author named none. Refuses (``CampaignRefused``)
    a security kind, a campaign without a correction template and without a reason, a
    schedule in the past, an unknown or unapproved template, an empty or uncountable
    segment. Needs ``campaigns.change_campaign``.
    """
    _require(user, "change_campaign", "submit campaigns")
    # Counting the audience and the pre-flight may take seconds on a big segment: done before the
    # transaction, so that no lock is held meanwhile (on SQLite a write transaction stops every
    # other writer, OTPs included); the row then commits only if nobody changed it in between.
    read = Campaign.objects.select_related("kind", "segment").get(pk=campaign.pk)
    _refuse_unless_submittable(read)
    read.template_versions = resolved_templates(read)
    try:
        members = audience(read.segment)
    except AudienceUnavailable as exc:
        raise CampaignRefused(str(exc), "segment") from None
    if members.size == 0:
        raise CampaignRefused(f"Segment {read.segment.name!r} has no members: nobody would get it.", "segment")
    content_hash = campaign_hash(read, members)
    submitted_at = timezone.now()
    frozen = _frozen_preflight(read, submitted_at)
    with transaction.atomic():
        current = _locked(campaign)
        _refuse_unless_submittable(current)
        if current.updated_at != read.updated_at:
            raise ContentChanged(f"{current} changed while it was being submitted: read it again and resubmit.")
        current.template_versions, current.content_hash = read.template_versions, content_hash
        current.state, current.submitted_at, current.preflight = Campaign.State.SUBMITTED, submitted_at, frozen
        current.save()
        _audit(current, user, CampaignAudit.Action.SUBMIT, audience=members.size, templates=current.template_versions)
    return current


def _refuse_unless_submittable(campaign: Campaign) -> None:
    if campaign.state != Campaign.State.DRAFT:
        raise CampaignRefused(f"{campaign} is {campaign.state}: only a draft can be submitted.", "state")
    _refuse_if(_draft_problem(campaign, timezone.now()) or _correction_problem(campaign, complete=True))


def _frozen_preflight(campaign: Campaign, now: datetime) -> dict[str, Any]:
    """The pre-flight frozen into a submission; a template that cannot render the params refuses it."""
    try:
        return preflight(campaign, now)
    except RenderError as exc:
        raise CampaignRefused(f"A template cannot be rendered with these params: {exc}", "params") from None


def approval_problem(campaign: Campaign, user: Actor) -> str | None:
    """Why ``user`` may not approve or reject ``campaign`` now, or None when they may.

    The rule (DESIGN.md §5): the approve permission, and not a writer of the campaign —
    its author, or anyone who edited or submitted it — whatever else they hold (a
    superuser too); and only a submitted campaign. Never an API client.
    """
    if isinstance(user, ApiClient):
        return f"API client {user.name} may not approve campaigns: a person approves them."
    name = user.get_username()
    if not user.has_perm("campaigns.approve_campaign"):
        return f"{name} may not approve campaigns."
    wrote = (
        campaign.author_id == user.pk
        or CampaignAudit.objects.filter(campaign=campaign, actor=user, action__in=WRITING_ACTIONS).exists()
    )
    if wrote:
        return f"{campaign} was written by {name}: a second person must approve it."
    if campaign.state != Campaign.State.SUBMITTED:
        return f"{campaign} is {campaign.state}, not waiting for approval."
    return None


def awaiting_approval(user: AbstractBaseUser) -> QuerySet[Campaign]:
    """The submitted campaigns ``user`` may approve: ``approval_problem``'s rule as one query (none written by them).

    The caller checks the approve permission (the navigation's badge shows nothing without it).
    """
    wrote = CampaignAudit.objects.filter(campaign=OuterRef("pk"), actor=user.pk, action__in=WRITING_ACTIONS)
    return Campaign.objects.filter(state=Campaign.State.SUBMITTED).exclude(author=user.pk).exclude(Exists(wrote))


def approve(campaign: Campaign, user: AbstractBaseUser, shown_hash: str, comment: str = "") -> Campaign:
    """Approve ``campaign`` as ``user`` was shown it (``shown_hash``: the hash on their page), with an optional comment.

    Raises ``PermissionRefused`` (``approval_problem``), or ``ContentChanged`` when the
    stored hash is not the one shown, or when the content moved under the submission
    (a list segment's members changed): then the campaign goes back to draft as well.
    The scheduler starts it when its time comes (``fanout.start_due``).
    """
    return _decide(campaign, user, shown_hash, CampaignApproval.Decision.APPROVED, comment.strip())


def reject(campaign: Campaign, user: AbstractBaseUser, shown_hash: str, comment: str) -> Campaign:
    """Reject ``campaign`` as shown, saying why in ``comment`` (required); same rule and errors as ``approve``."""
    if not comment.strip():
        raise CampaignRefused("Say why you reject it: the author reads your comment.", "comment")
    return _decide(campaign, user, shown_hash, CampaignApproval.Decision.REJECTED, comment.strip())


def _decide(campaign: Campaign, user: AbstractBaseUser, shown_hash: str, decision: str, comment: str) -> Campaign:
    if len(comment) > MAX_COMMENT:
        # Every page, the API and the PDF report carry it: a million characters took the report 17 s.
        raise CampaignRefused(
            f"A comment is up to {MAX_COMMENT:,} characters; this one has {len(comment):,}.", "comment"
        )
    read = Campaign.objects.select_related("kind", "segment").get(pk=campaign.pk)
    problem = approval_problem(read, user)
    if problem:
        raise PermissionRefused(problem)
    # Hashed before the transaction, for the reason ``submit`` counts before it: no lock held while counting.
    now_hash = campaign_hash(read)
    with transaction.atomic():
        current = _locked(campaign)
        problem = approval_problem(current, user)
        if problem:
            raise PermissionRefused(problem)
        if current.updated_at != read.updated_at:
            raise ContentChanged(f"{current} changed while you decided: open it again and decide on what it says now.")
        if now_hash == current.content_hash:
            if shown_hash != current.content_hash:
                raise ContentChanged(
                    f"{current} is not what you were shown (content hash {shown_hash[:12]}…, it has "
                    f"{current.content_hash[:12]}…): open it again, read it, and decide on what it says now."
                )
            return _record_decision(current, user, decision, comment)
        reason = _void(current, "its content changed after it was submitted (a template or the segment's members)")
        current.save()
        _audit(current, user, CampaignAudit.Action.VOID, reason=reason, found_hash=now_hash)
    raise ContentChanged(f"{current} changed after it was submitted and is back to draft: it must be resubmitted.")


def _record_decision(campaign: Campaign, user: AbstractBaseUser, decision: str, comment: str) -> Campaign:
    """Write the decision on ``campaign`` (locked by the caller, its hash checked)."""
    approved = decision == CampaignApproval.Decision.APPROVED
    CampaignApproval.objects.create(
        campaign=campaign, approver=user, decision=decision, comment=comment, content_hash=campaign.content_hash
    )
    campaign.state = Campaign.State.APPROVED if approved else Campaign.State.REJECTED
    campaign.save()
    _audit(campaign, user, CampaignAudit.Action.APPROVE if approved else CampaignAudit.Action.REJECT,
           **({"comment": comment} if comment else {}))  # fmt: skip
    return campaign


def may_cancel(campaign: Campaign, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may cancel ``campaign``: its author, a writer of it (create, edit, submit), an approver."""
    return (
        campaign.author_id == user.pk
        or user.has_perm("campaigns.approve_campaign")
        or CampaignAudit.objects.filter(campaign=campaign, actor=user, action__in=WRITING_ACTIONS).exists()
    )


def cancel(campaign: Campaign, user: AbstractBaseUser) -> Campaign:
    """Cancel a campaign not yet done: its author, a writer of it, or an approver may.

    One short transaction, whatever the campaign's size: first the rows a worker could claim
    (a task in Redis, or a retry waiting for its delay) become ``cancelled`` with their history
    (``ledger.stop_unsent(fed_only=True)``) — a worker that pops such a task waits for this
    transaction and then finds its claim (conditional on ``queued``) refused, so nothing more is
    handed over from here on. Then the campaign's row lock ``FOR UPDATE`` (``_exclusive``): a fan-out
    batch or a feed under way commits first (the feeder's ``FOR KEY SHARE`` on the campaigns it feeds
    conflicts only with that lock), and the rows that feed handed over
    are stopped the same way; after it nothing makes, feeds or releases rows of the campaign.
    Last, ``cancelled_at`` and the audit row with the counts at that instant — the rows not
    handed over counted ``cancelled`` — from which ``ledger.ledger`` derives the exact split
    later. The rows without a task are written ``cancelled`` after the commit, a first chunk
    here and the rest by the scheduler (``fanout.stop_cancelled``): a million rows in the
    transaction took 48 s, during which every standard worker that popped one of its tasks
    waited. Raises ``PermissionRefused`` or ``CampaignRefused`` (already cancelled or done).
    """
    with transaction.atomic():
        current = Campaign.objects.get(pk=campaign.pk)
        _refuse_cancel(current, user)
        now = timezone.now()
        stopped = ledger.stop_unsent(current, now, fed_only=True)
        current = _exclusive(campaign)
        _refuse_cancel(current, user)
        stopped += ledger.stop_unsent(current, now, fed_only=True)
        at_cancel = ledger.as_cancelled(ledger.counts(current))
        previous = current.state
        current.state, current.cancelled_at = Campaign.State.CANCELLED, now
        current.save()
        _audit(
            current, user, CampaignAudit.Action.CANCEL, from_state=previous, sent=ledger.handed_over(at_cancel),
            cancelled=at_cancel[State.CANCELLED], in_flight=at_cancel[State.SENDING],
            counts={state: n for state, n in at_cancel.items() if n},
        )  # fmt: skip
    ledger.stop_unsent(current, now, limit=CANCEL_CHUNK)
    return current


def _refuse_cancel(campaign: Campaign, user: AbstractBaseUser) -> None:
    if not may_cancel(campaign, user):
        raise PermissionRefused(f"{user.get_username()} may not cancel {campaign}: its author or an approver may.")
    if campaign.state in FINAL_STATES:
        raise CampaignRefused(f"{campaign} is already {campaign.state}.", "state")


# --- pause and resume ----------------------------------------------------------------------------


def may_pause(campaign: Campaign, actor: Actor) -> bool:
    """Whether ``actor`` may pause or resume ``campaign``: its author (or a writer of it), or an approver.

    An API client may for the campaigns it created, as their author.
    """
    if isinstance(actor, ApiClient):
        return campaign.client_id == actor.pk
    return may_cancel(campaign, actor)


def _refuse_pause(campaign: Campaign, actor: Actor, wanted: str, doing: str) -> None:
    """Refuse ``doing`` (pause, resume) unless ``actor`` may and ``campaign`` is in state ``wanted``."""
    if not may_pause(campaign, actor):
        raise PermissionRefused(f"{_actor_name(actor)} may not {doing} {campaign}: its author or an approver may.")
    if campaign.state != wanted:
        raise CampaignRefused(f"{campaign} is {campaign.state}: only a {wanted} campaign can be {doing}d.", "state")


def _exclusive(campaign: Campaign) -> Campaign:
    """``campaign`` re-read under ``FOR UPDATE``: unlike ``_locked``, this waits for a feed under way.

    The feeder holds ``FOR KEY SHARE`` on the campaigns it feeds until its rows are marked
    (``fanout.feed``); ``FOR NO KEY UPDATE`` does not conflict with it, ``FOR UPDATE`` does. So
    after this lock every row a feed marked is visible, and a feed that starts later waits, then
    finds the campaign no longer running.
    """
    return Campaign.objects.select_for_update().get(pk=campaign.pk)


def pause(campaign: Campaign, actor: Actor) -> Campaign:
    """Pause a running campaign (its author, a writer of it, an approver; an API client that created it).

    Like ``cancel``, the rows a worker could claim (``queued`` with a task in the queue,
    ``queued_at`` set) are un-fed first, before the campaign's lock — a worker's claim needs
    ``queued_at`` set (``delivery/batch.py``, ``actions.claim``), so nothing more is handed over
    from the commit on, even while a fan-out batch holds the lock — then again under the lock,
    which also waits for a feed under way (``_exclusive``). Their tasks are dropped by the
    worker; the rows stay ``queued`` and are fed again after ``resume``. Nothing makes, releases,
    feeds, ends or finishes a paused campaign (``fanout``: they all ask for ``running``), and
    the state is in PostgreSQL only, so a pause survives every process restarting. Audited
    ``pause`` with the counts per state and the rows un-fed. Raises ``PermissionRefused``, or
    ``CampaignRefused`` when the campaign is not running.
    """
    _refuse_pause(Campaign.objects.get(pk=campaign.pk), actor, Campaign.State.RUNNING, "pause")
    with transaction.atomic():
        unfed = unfeed(campaign)
        current = _exclusive(campaign)
        _refuse_pause(current, actor, Campaign.State.RUNNING, "pause")
        unfed += unfeed(current)
        current.state, current.paused_at = Campaign.State.PAUSED, timezone.now()
        current.save()
        _audit(current, actor, CampaignAudit.Action.PAUSE, unfed=unfed, counts=_nonzero(ledger.counts(current)))
    return current


def unfeed(campaign: Campaign) -> int:
    """Take back ``campaign``'s rows fed but not yet claimed (``queued_at`` NULL again, still ``queued``); how many.

    At most ``NOTIFY_CAMPAIGN_FEED`` rows plus retries waiting for their delay: one UPDATE on
    the (campaign, state) index. No history row: the state does not change.
    """
    fed = Notification.objects.filter(campaign_id=campaign.pk, state=State.QUEUED, queued_at__isnull=False)
    return fed.update(queued_at=None)


def resume(campaign: Campaign, actor: Actor) -> Campaign:
    """Resume a paused campaign (who may pause it may): it is ``running`` again and continues where it stood.

    Nothing is re-made: the fan-out continues after its mark, ``release_due`` releases the
    scheduled rows whose time came meanwhile, and the feeder hands over exactly the rows still
    ``queued`` — those not handed over before the pause. A spread campaign's rows not yet
    released move later by the pause and its rate clock restarts (``pacing.on_resume``), so the
    pause is not made up in a burst. Audited ``resume`` with how long it was paused
    (``paused_seconds``), the spread rows moved (``spread_shifted``) and the counts per state.
    Raises ``PermissionRefused``, or ``CampaignRefused`` when the campaign is not paused.
    """
    _refuse_pause(Campaign.objects.get(pk=campaign.pk), actor, Campaign.State.PAUSED, "resume")
    with transaction.atomic():
        current = _locked(campaign)
        _refuse_pause(current, actor, Campaign.State.PAUSED, "resume")
        now = timezone.now()
        paused_seconds = (now - current.paused_at).total_seconds() if current.paused_at else 0.0
        current.state, current.paused_at = Campaign.State.RUNNING, None
        current.save()
        # After the save, which would write the rate clock back as it was read.
        shifted = pacing.on_resume(current, paused_seconds)
        _audit(
            current, actor, CampaignAudit.Action.RESUME, paused_seconds=round(paused_seconds, 3),
            spread_shifted=shifted, counts=_nonzero(ledger.counts(current)),
        )  # fmt: skip
    return current


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {state: n for state, n in counts.items() if n}


# --- campaigns made from another: the remainder of a cancel, a correction ---------------------------


def resend_remainder(campaign: Campaign, user: AbstractBaseUser) -> Campaign:
    """A new draft of cancelled ``campaign`` to exactly the recipients its cancel stopped; returns it.

    Same content (kind, channel, templates, params, end time if still ahead, correction, pacing), sent
    "now" once approved — its own two-person approval, like any campaign. Its list segment is
    copied set-based from the cancelled rows. Audited ``resend`` on the original, naming the
    draft. Needs ``campaigns.add_campaign``; raises ``CampaignRefused`` when the campaign is
    not cancelled or its cancel stopped nobody.
    """
    _require(user, "add_campaign", "create campaigns")
    with transaction.atomic():
        original = _locked(campaign)
        if original.state != Campaign.State.CANCELLED:
            raise CampaignRefused(
                f"{original} is {original.state}: only a cancelled campaign has a remainder.", "state"
            )
        _refuse_second(original, Origin.REMAINDER)
        _refuse_archived(original, "its remainder")
        segment = Segment.objects.create(
            name=_derived_name(original, " (remainder)"), kind=Segment.Kind.LIST, created_by=user
        )
        size = ledger.copy_recipients(original, (State.CANCELLED, *ledger.UNSENT), segment)
        if not size:
            raise CampaignRefused(f"{original}'s cancel stopped no notification: there is no remainder.", "state")
        fields = _copied_content(original)
        name = _derived_name(original, " (remainder)")
        draft = _derived_draft(original, user, Origin.REMAINDER, name=name, segment=segment, **fields)
        _audit(original, user, CampaignAudit.Action.RESEND, draft=draft.pk, recipients=size)
    return draft


def _derived_name(original: Campaign, suffix: str) -> str:
    """The name of a campaign (and its segment) made from ``original``, cut to fit the 200-character column.

    A remainder of a remainder keeps one suffix: each generation used to add one, until a 500.
    """
    if original.name.endswith(suffix):
        return original.name
    return original.name[: Campaign._meta.get_field("name").max_length - len(suffix)] + suffix


def existing_derived(original: Campaign, purpose: str) -> Campaign | None:
    """The remainder or correction campaign already made from ``original`` and not cancelled, if any."""
    made = original.derived.filter(origin_purpose=purpose).exclude(state=Campaign.State.CANCELLED)
    return made.order_by("-pk").first()


def _refuse_second(original: Campaign, purpose: str) -> None:
    """Refuse a second remainder or correction while one is alive: the same people would be sent it twice."""
    earlier = existing_derived(original, purpose)
    if earlier is not None:
        what = "resends the remainder of" if purpose == Origin.REMAINDER else "corrects"
        raise CampaignRefused(
            f"{earlier} already {what} {original} ({earlier.get_state_display().lower()}): continue with it, "
            "or cancel it first.",
            "state",
        )


def _refuse_archived(original: Campaign, what: str) -> None:
    """Refuse what needs ``original``'s rows once retention may have deleted them (``campaigns/archive.py``)."""
    if original.archived_at:
        raise CampaignRefused(
            f"{original}'s notifications were deleted by retention after {original.archived_at:%Y-%m-%d}: {what} "
            "is no longer known. Compose a new campaign instead.",
            "state",
        )


def correction_templates(original: Campaign, version: TemplateVersion) -> dict[str, int]:
    """The templates a correction of ``original`` sends, language → version id: ``version``, and its kind's others.

    A kind of its own (a ``promo_correction``) holds correction texts in every language: its newest
    approved version on the channel goes to the recipients of each other language. A correction of
    the campaign's own kind (a newer promo) is a correction in ``version``'s language alone: the
    kind's other versions may be the very message being corrected, so recipients of other languages
    get it only as the kind's default-language fallback, else none (``no-template``, counted in the
    draft's pre-flight), never the original again.
    """
    chosen = {version.language: version.pk}
    if version.kind_id == original.kind_id:
        return chosen
    newest = TemplateVersion.objects.filter(
        kind=version.kind_id, channel=version.channel, status=TemplateVersion.Status.APPROVED
    ).order_by("language", "-version")
    for language, pk in newest.values_list("language", "pk"):
        chosen.setdefault(language, pk)
    return chosen


def draft_correction(campaign: Campaign, user: AbstractBaseUser) -> Campaign:
    """A new draft to exactly the recipients who were sent ``campaign``, with its correction template; returns it.

    For a done or cancelled campaign that sent anything and named a correction version: that
    version's kind and channel, its templates per language (``correction_templates``), the original's
    params and pacing pre-filled, sent "now"
    once approved. A correction of a correction names no correction of its own (its reason
    says so). Audited ``correct`` on the original, naming the draft. Needs
    ``campaigns.add_campaign``; raises ``CampaignRefused`` (not finished, sent nothing, or
    its correction was "none", quoting the reason given).
    """
    _require(user, "add_campaign", "create campaigns")
    with transaction.atomic():
        original = _locked(campaign)
        if original.state not in FINAL_STATES:
            raise CampaignRefused(f"{original} is {original.state}: correct it once it is done or cancelled.", "state")
        version = original.correction_version
        if version is None:
            raise CampaignRefused(
                f"{original} has no correction template: it said none ({original.correction_none_reason!r}). "
                "Compose a new campaign instead.",
                "correction",
            )
        _refuse_second(original, Origin.CORRECTION)
        _refuse_archived(original, "who was sent it")
        segment = Segment.objects.create(
            name=_derived_name(original, " (correction)"), kind=Segment.Kind.LIST, created_by=user
        )
        size = ledger.copy_recipients(original, ledger.REACHED, segment)
        if not size:
            raise CampaignRefused(f"{original} sent nothing: there is nobody to correct.", "state")
        draft = _derived_draft(
            original, user, Origin.CORRECTION, name=_derived_name(original, " (correction)"), segment=segment,
            kind=version.kind, channel=version.channel, template_versions=correction_templates(original, version),
            params=original.params, correction_version=None,
            correction_none_reason=f"This corrects campaign {original.pk}; a correction names no correction.",
            **_copied_pacing(original),
        )  # fmt: skip
        _audit(original, user, CampaignAudit.Action.CORRECT, draft=draft.pk, recipients=size)
    return draft


def _copied_content(original: Campaign) -> dict[str, Any]:
    """What a remainder keeps of its original: its content, local-time wall clock, end time if still ahead, pacing."""
    local = original.schedule_mode == ScheduleMode.LOCAL_TIME
    end_at = original.end_at if original.end_at and original.end_at > timezone.now() else None
    return {
        "kind": original.kind, "channel": original.channel, "template_versions": original.template_versions,
        "params": original.params, "schedule_mode": ScheduleMode.LOCAL_TIME if local else ScheduleMode.NOW,
        "local_time": original.local_time if local else None, "end_at": end_at,
        "correction_version": original.correction_version,
        "correction_none_reason": original.correction_none_reason, **_copied_pacing(original),
    }  # fmt: skip


def _copied_pacing(original: Campaign) -> dict[str, Any]:
    """The pacing a campaign made from ``original`` keeps: rate, sending hours, spread (its instant if still ahead).

    The approver of the original approved its pace with its content (``content_hash``): a remainder or a
    correction sent "as fast as the budget allows" would reach people at an hour, or a rate, nobody approved.
    """
    spread_until = original.spread_until if original.spread_until and original.spread_until > timezone.now() else None
    return {
        "rate_per_second": original.rate_per_second, "spread_seconds": original.spread_seconds,
        "spread_until": spread_until, "sending_hours_start": original.sending_hours_start,
        "sending_hours_end": original.sending_hours_end,
    }  # fmt: skip


def _derived_draft(original: Campaign, user: AbstractBaseUser, purpose: str, **fields: Any) -> Campaign:
    """``create_draft`` with ``fields``, then marked as made from ``original`` for ``purpose`` (Origin)."""
    draft = create_draft(user, **fields).campaign
    Campaign.objects.filter(pk=draft.pk).update(origin=original, origin_purpose=purpose)
    draft.origin, draft.origin_purpose = original, purpose
    return draft


# --- the scheduler's actions (campaigns/fanout.py) -----------------------------------------------

SCHEDULER = "scheduler"


def _scheduler_audit(campaign: Campaign, action: str, **detail: Any) -> None:
    CampaignAudit.objects.create(
        campaign=campaign, actor=None, actor_name=SCHEDULER, action=action, content_hash=campaign.content_hash,
        detail=detail,
    )  # fmt: skip


# How much a filter segment's audience may grow between approval and start (a filter reaches whoever
# matches when it runs); beyond it the approval no longer covers who would be sent it.
AUDIENCE_GROWTH_ALLOWED = 0.10


def approved_audience(campaign: Campaign) -> int | None:
    """The audience size the approver was shown (the frozen pre-flight, else the submit's audit row)."""
    if "audience" in campaign.preflight:
        return int(campaign.preflight["audience"])
    submit = campaign.audit.filter(action=CampaignAudit.Action.SUBMIT).order_by("-at").first()
    return submit.detail.get("audience") if submit else None


def start_problem(campaign: Campaign, found: Audience, found_hash: str) -> str | None:
    """Why an approved campaign may not start as it stands (its content is not what was approved); None if it may.

    A list segment's members and everything else in the content hash are fixed at approval, so
    any difference in the hash is a change nobody approved. A filter segment reaches whoever
    matches when it runs, so its members may differ, but its audience may not grow past the
    size approved by more than ``AUDIENCE_GROWTH_ALLOWED`` (rounded up): an API key that adds
    attributes must not widen an approved campaign without limit.
    """
    if found_hash == campaign.content_hash:
        return None
    if campaign.segment.kind == Segment.Kind.LIST:
        return "its content changed after it was approved"
    approved = approved_audience(campaign)
    if approved is None:
        return None
    allowed = approved + math.ceil(approved * AUDIENCE_GROWTH_ALLOWED)
    if found.size > allowed:
        return (
            f"its filter now matches {found.size:,} recipients, {approved:,} were approved "
            f"(at most {allowed:,} may go without a new approval)"
        )
    return None


def _void_at_start(current: Campaign, problem: str, **detail: Any) -> str:
    """Return a locked approved campaign that may not start to draft, audited as the scheduler; its new state."""
    reason = _void(current, problem)
    current.save()
    _scheduler_audit(current, CampaignAudit.Action.VOID, reason=reason, **detail)
    return current.state


def refuse_start(campaign: Campaign, problem: str) -> None:
    """Return an approved campaign whose audience cannot be counted any more to draft, saying why (the scheduler)."""
    with transaction.atomic():
        current = _locked(campaign)
        if current.state == Campaign.State.APPROVED:
            _void_at_start(current, problem)


def start(campaign: Campaign, found: Audience | None = None, found_hash: str = "") -> bool:
    """Move an approved campaign to running (the scheduler, when its time came); False if it did not start.

    ``found`` and ``found_hash``: its audience and content hash counted by the caller just before,
    outside any transaction (``fanout.start_due``); when given and ``start_problem`` finds the
    content is no longer what was approved, the campaign goes back to draft (audited ``void``)
    instead. A conditional UPDATE, so two schedulers start it once; audited as the scheduler,
    with the approved content hash and the audience at the start. The fan-out
    (``campaigns/fanout.py``) then makes its notifications.
    """
    with transaction.atomic():
        if found is not None:
            current = _locked(campaign)
            problem = current.state == Campaign.State.APPROVED and start_problem(current, found, found_hash)
            if problem:
                campaign.state = _void_at_start(current, problem, found_hash=found_hash)
                return False
        moved = Campaign.objects.filter(pk=campaign.pk, state=Campaign.State.APPROVED).update(
            state=Campaign.State.RUNNING, updated_at=timezone.now()
        )
        if moved:
            campaign.state = Campaign.State.RUNNING
            detail = {"audience": found.size} if found is not None else {}
            _scheduler_audit(campaign, CampaignAudit.Action.START, **detail)
    return bool(moved)


def record_schedule(campaign: Campaign, detail: dict[str, Any]) -> None:
    """Audit, as the scheduler, when a started local-time campaign goes out: ``detail`` holds its start and waves.

    Written once, right after ``start`` (``fanout.start_due``; shape in ``fanout.schedule_detail``).
    """
    _scheduler_audit(campaign, CampaignAudit.Action.SCHEDULE, **detail)


def record_end(campaign: Campaign, detail: dict[str, Any]) -> None:
    """Audit, as the scheduler, that ``campaign``'s end time came and nothing of it is left to hand over.

    ``detail``: ``end_at`` and the notifications per state then (``fanout.end_due``).
    """
    _scheduler_audit(campaign, CampaignAudit.Action.END, **detail)


def finish(campaign: Campaign, counts: dict[str, int]) -> bool:
    """Move a running campaign to done once nothing of it is left to send; False if it was not running.

    ``counts`` (notifications per state at that moment) is kept in the audit row.
    """
    with transaction.atomic():
        moved = Campaign.objects.filter(pk=campaign.pk, state=Campaign.State.RUNNING).update(
            state=Campaign.State.DONE, updated_at=timezone.now()
        )
        if moved:
            campaign.state = Campaign.State.DONE
            _scheduler_audit(campaign, CampaignAudit.Action.DONE, counts=counts)
    return bool(moved)
