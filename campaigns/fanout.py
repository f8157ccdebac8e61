"""How a million rows are made: a running campaign's notifications, set-based in SQL, and their hand-over.

The scheduler process (``run_scheduler``) calls ``tick`` in a thread of its own, so a long
fan-out never delays its sweeps of the high tier. Each tick:

1. **start** — approved campaigns whose time came (``now``, or ``at`` an instant that passed)
   become ``running`` (``actions.start``, audited). ``local_time`` campaigns wait for the waves.
2. **fan out** — one batch of recipients per running campaign (``fan_out``): one
   ``INSERT … SELECT … ON CONFLICT DO NOTHING`` makes a notification for each recipient of
   the batch, keyed ``campaign:<id>:<user id>`` in the scope ``campaign:<id>``, with the
   template version of the recipient's language (else the kind's default language), the
   preview rendered once per language (params are shared), and the policy applied in the same
   statement by joins: ``opted-out`` (a Preference off, for kinds users may opt out of), then
   ``no-address`` / ``address-disabled`` (email, SMS) or ``no-device`` (push) — the rules and
   reasons of ``policy.route`` — and ``no-template``; such rows are ``suppressed`` with their
   reason, the rest ``queued``. Their history rows are written by the same statement
   (PostgreSQL) or the next one in the same transaction (SQLite).
3. **feed** — queued campaign rows are handed to the standard tier only while its queue holds
   fewer than ``NOTIFY_CAMPAIGN_FEED`` tasks, at a lower Huey priority than transactional
   traffic of that tier (``feed``). A row's ``queued_at`` stays NULL until then: the sweeper
   leaves such rows alone, and re-enqueues fed ones whose task was lost.
4. **done** — a running campaign whose fan-out finished and which has nothing queued,
   scheduled or sending becomes ``done`` (``actions.finish``, audited with the counts).

Resumable: batches go in recipient-id order over disjoint ranges, two at a time on two
connections (``PARALLEL``, one per core), each in its own transaction; the campaign's
``fanout_last_recipient`` moves past a round only once all its batches committed, so a crash (a
killed scheduler) loses at most the round under way and the next run starts after the last round
whose mark moved; the UNIQUE (scope, key) index is the guarantee that a recipient never gets two,
even if a range is made again or two schedulers race. Each batch holds a share lock on the
campaign's row (a cancel waits for the round) and stops once the campaign is no longer running.

The audience is evaluated batch by batch: a list segment's members are fixed (its digest is in
the approved hash); a filter segment reaches whoever matches when their batch is made.
"""

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from backend.notifications import masking
from backend.notifications.models import (
    Channel,
    Device,
    Notification,
    Preference,
    Priority,
    Recipient,
    State,
    StateChange,
    TemplateVersion,
)
from backend.notifications.queues import HUEYS
from backend.notifications.tasks import enqueue_delivery
from campaigns import actions
from campaigns.audience import recipients
from campaigns.models import Campaign, ScheduleMode

logger = logging.getLogger(__name__)

BATCH = 50_000
# Batches made at once on connections of their own: one per core of the 2-core machine measured (README).
PARALLEL = 2
# Huey priority of campaign tasks: below transactional standard traffic (0), popped after it.
CAMPAIGN_PRIORITY = -1
# Seconds the scheduler's campaign thread waits when a tick found no fan-out work left.
IDLE_SECONDS = 1.0
# What keeps a campaign from being done.
UNFINISHED = (State.QUEUED, State.SCHEDULED, State.SENDING)


@dataclass(frozen=True)
class FanOut:
    """What one ``fan_out`` call did: batches committed, notifications made, and whether every recipient has one."""

    batches: int
    created: int
    complete: bool


@dataclass(frozen=True)
class Plan:
    """Everything a batch's SQL needs, worked out once per fan-out (templates rendered once per language)."""

    campaign: Campaign
    audience_sql: str
    audience_params: tuple
    templates: dict[str, tuple[int, str]]  # language → (version id, masked preview)
    fallback: tuple[int, str] | None  # the kind's default language
    params_json: str
    masked_params_json: str


# --- 1. start ------------------------------------------------------------------------------------


def due_campaigns(now: datetime) -> list[Campaign]:
    """Approved campaigns whose time came: ``now`` ones, and ``at`` ones whose instant passed."""
    due = Q(schedule_mode=ScheduleMode.NOW) | Q(schedule_mode=ScheduleMode.AT, send_at__lte=now)
    return list(Campaign.objects.filter(due, state=Campaign.State.APPROVED).order_by("pk"))


def start_due(now: datetime | None = None) -> list[int]:
    """Start every due campaign (``actions.start``); the ids of those this call started."""
    return [campaign.pk for campaign in due_campaigns(now or timezone.now()) if actions.start(campaign)]


# --- 2. fan out ----------------------------------------------------------------------------------


def fan_out(campaign_id: int, batch: int = BATCH, max_batches: int | None = None, parallel: int = PARALLEL) -> FanOut:
    """Make the notifications of running campaign ``campaign_id``, ``batch`` recipients per transaction.

    Continues after ``fanout_last_recipient``; stops after ``max_batches`` (None: until every
    recipient has one, then sets ``fanned_out_at``) or when the campaign is no longer running.
    Up to ``parallel`` batches over consecutive, disjoint recipient ranges are made at once, each
    in a transaction on a connection of its own (``_parallel_step``); one by one, each advancing
    the mark in its own transaction (``_step_alone``), when ``parallel`` is 1, inside a caller's
    transaction (whose rows other connections cannot see) or off PostgreSQL. Raises
    ``Campaign.DoesNotExist``, ``audience.AudienceUnavailable`` (a filter that no longer
    validates) and ``rendering.RenderError`` (a template that cannot render the campaign's
    params), before any row is made; a batch's database error once its round has finished.
    """
    campaign = Campaign.objects.select_related("kind", "segment").get(pk=campaign_id)
    if campaign.state != Campaign.State.RUNNING or campaign.fanned_out_at:
        return FanOut(0, 0, complete=campaign.fanned_out_at is not None)
    plan = make_plan(campaign)
    alone = parallel <= 1 or connection.in_atomic_block or connection.vendor != "postgresql"
    after, batches, created = campaign.fanout_last_recipient, 0, 0
    while max_batches is None or batches < max_batches:
        room = parallel if max_batches is None else min(parallel, max_batches - batches)
        step = _step_alone(plan, after, batch) if alone else _parallel_step(plan, after, batch, room)
        if step is None:
            return FanOut(batches, created, complete=False)
        if step.upper is None:
            return FanOut(batches, created, complete=True)
        after, batches, created = step.upper, batches + step.batches, created + step.created
    return FanOut(batches, created, complete=False)


@dataclass(frozen=True)
class _Step:
    """What one step of ``fan_out`` did: the new mark (None: every recipient has one), batches and rows made."""

    upper: int | None
    batches: int = 0
    created: int = 0


def _step_alone(plan: Plan, after: int, batch: int) -> _Step | None:
    """One batch and the mark past it, in one transaction that holds the campaign's row lock; None once not running."""
    campaign_id = plan.campaign.pk
    with transaction.atomic():
        if not _lock_if_running(campaign_id):
            return None
        upper = _batch_upper_bound(plan, after, batch)
        if upper is None:
            Campaign.objects.filter(pk=campaign_id).update(fanned_out_at=timezone.now())
            return _Step(None)
        created = _insert_batch(plan, after, upper)
        Campaign.objects.filter(pk=campaign_id).update(fanout_last_recipient=upper)
    return _Step(upper, 1, created)


def _parallel_step(plan: Plan, after: int, batch: int, count: int) -> _Step | None:
    """Up to ``count`` batches at once (``_round``), then the mark past all of them; None once not running.

    The mark moves only after every batch of the round committed: a crash in between makes the
    round again, and the UNIQUE key skips the rows that exist (none twice, none skipped).
    """
    campaign_id = plan.campaign.pk
    ranges = _next_ranges(plan, after, batch, count)
    if not ranges:
        with transaction.atomic():
            if not _lock_if_running(campaign_id):
                return None
            Campaign.objects.filter(pk=campaign_id).update(fanned_out_at=timezone.now())
        return _Step(None)
    created = _round(plan, ranges)
    if created is None:
        return None
    upper = ranges[-1][1]
    Campaign.objects.filter(pk=campaign_id, state=Campaign.State.RUNNING).update(fanout_last_recipient=upper)
    return _Step(upper, len(ranges), created)


def _next_ranges(plan: Plan, after: int, batch: int, count: int) -> list[tuple[int, int]]:
    """Up to ``count`` consecutive ranges (after, upper] of ``batch`` audience members each, from ``after`` on."""
    ranges: list[tuple[int, int]] = []
    while len(ranges) < count and (upper := _batch_upper_bound(plan, after, batch)) is not None:
        ranges.append((after, upper))
        after = upper
    return ranges


def _round(plan: Plan, ranges: list[tuple[int, int]]) -> int | None:
    """Make the batches of ``ranges`` at once, the first on this connection, each other on a thread's own.

    How many notifications they made; None if the campaign was no longer running for one of them
    (the others may have committed: the mark does not move, and a later run skips their rows by the
    UNIQUE key). Raises the first batch's error once every batch has finished.
    """
    with ThreadPoolExecutor(max_workers=len(ranges) - 1 or 1) as pool:
        others = [pool.submit(_batch_on_own_connection, plan, after, upper) for after, upper in ranges[1:]]
        made = [_shared_lock_batch(plan, *ranges[0]), *(other.result() for other in others)]
    return None if None in made else sum(made)


def _batch_on_own_connection(plan: Plan, after: int, upper: int) -> int | None:
    """``_shared_lock_batch`` in a worker thread, whose connection (Django's are per thread) is closed after it."""
    try:
        return _shared_lock_batch(plan, after, upper)
    finally:
        connection.close()


def _shared_lock_batch(plan: Plan, after: int, upper: int) -> int | None:
    """One batch in a transaction holding a share lock on the campaign's row; None once it is no longer running.

    A share lock, not the row lock of a batch made alone: batches of one round hold it together,
    and a cancel (an UPDATE of the row) still waits for all of them.
    """
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {Campaign._meta.db_table} WHERE id = %s AND state = %s FOR SHARE",
                [plan.campaign.pk, Campaign.State.RUNNING],
            )
            if cursor.fetchone() is None:
                return None
        return _insert_batch(plan, after, upper)


def make_plan(campaign: Campaign) -> Plan:
    """What every batch of ``campaign`` needs, worked out once: its audience query and a masked preview per language.

    Raises ``audience.AudienceUnavailable`` and ``rendering.RenderError`` (see ``fan_out``).
    """
    kind, params = campaign.kind, campaign.params
    versions = TemplateVersion.objects.in_bulk([int(pk) for pk in campaign.template_versions.values()])
    templates = {
        language: (int(pk), masking.masked_preview(versions[int(pk)], kind, params))
        for language, pk in campaign.template_versions.items()
    }
    audience_sql, audience_params = recipients(campaign.segment).order_by().values("pk").query.sql_with_params()
    return Plan(
        campaign=campaign,
        audience_sql=audience_sql,
        audience_params=tuple(audience_params),
        templates=templates,
        fallback=templates.get(kind.default_language),
        params_json=json.dumps(params),
        masked_params_json=json.dumps(masking.masked_params(kind, params)),
    )


def _lock_if_running(campaign_id: int) -> bool:
    """Lock the campaign's row for this batch (a cancel waits for it); False once it is no longer running."""
    return Campaign.objects.select_for_update(no_key=True).filter(pk=campaign_id, state=Campaign.State.RUNNING).exists()


def _batch_upper_bound(plan: Plan, after: int, batch: int) -> int | None:
    """The highest recipient id of the next ``batch`` audience members after ``after``; None when none is left."""
    recipient = Recipient._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MAX(next_batch.id) FROM ("
            f" SELECT r.id FROM {recipient} r WHERE r.id > %s AND r.id IN ({plan.audience_sql})"
            f" ORDER BY r.id LIMIT %s) next_batch",
            [after, *plan.audience_params, batch],
        )
        return cursor.fetchone()[0]


def _insert_batch(plan: Plan, after: int, upper: int) -> int:
    """Insert the notifications of audience members ``after`` < id ≤ ``upper`` and their history; how many were new."""
    select, params = _select_new_notifications(plan, after, upper)
    into = _INSERT_NOTIFICATIONS.format(notification=Notification._meta.db_table)
    insert = f"{into} {select} ON CONFLICT (idempotency_scope, idempotency_key) DO NOTHING"
    history = f"INSERT INTO {StateChange._meta.db_table} (notification_id, from_state, to_state, reason, at)"
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # One statement: the history of exactly the rows this INSERT made (RETURNING skips conflicts).
            cursor.execute(
                f"WITH created AS ({insert} RETURNING id, state, reason)"
                f" {history} SELECT id, '', state, reason, %s FROM created",
                [*params, now],
            )
            return cursor.rowcount
        cursor.execute(insert, params)
        created = cursor.rowcount
        cursor.execute(
            f"{history} SELECT n.id, '', n.state, n.reason, %s FROM {Notification._meta.db_table} n"
            f" WHERE n.campaign_id = %s AND n.recipient_id > %s AND n.recipient_id <= %s"
            f" AND NOT EXISTS (SELECT 1 FROM {StateChange._meta.db_table} s WHERE s.notification_id = n.id)",
            [now, plan.campaign.pk, after, upper],
        )
        return created


# A UUIDv7 (RFC 9562 §5.7: 48-bit Unix ms, version 7, variant 10, random bits) built in SQL (PostgreSQL 15
# has no uuidv7()): a batch's keys land side by side in the primary-key index instead of all over it, which
# made a 300,000-row fan-out 14 % faster than gen_random_uuid() here.
_UUID7 = (
    "CAST(lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') || '7'"
    " || substr(md5(random()::text), 1, 3) || '8' || substr(md5(random()::text), 1, 15) AS uuid)"
)

_INSERT_NOTIFICATIONS = """
INSERT INTO {notification} (
    id, idempotency_key, idempotency_scope, request_hash, recipient_id, kind_id, channel, priority, params,
    state, reason, template_version_id, preview, provider, provider_ref, attempt_count, replayed_attempts,
    last_error, created_at, updated_at, campaign_id
)"""


def verdicts(plan: Plan, after: int, upper: int) -> tuple[str, list[Any]]:
    """SQL (and its params) of one verdict row per audience member ``after`` < id ≤ ``upper``: what the fan-out makes.

    Columns: ``recipient_id``, ``user_id``, ``language``, ``time_zone``, ``phone``, ``version_id``
    (the template version of their language, else the kind's default language; NULL when none),
    ``preview`` (masked, rendered once per language) and ``reason`` (the policy stop, '' to send).
    The fan-out inserts these rows; the pre-flight (``preflight.py``) groups them without inserting,
    so its counts are the fan-out's by construction.
    """
    campaign = plan.campaign
    templates_sql, templates_params = _templates_table(plan)
    reason_sql, reason_params = _reason(plan)
    fallback_id, fallback_preview = plan.fallback or (None, "")
    sql = f"""
    SELECT r.id AS recipient_id, r.user_id, r.language, r.time_zone, r.phone,
           COALESCE(own.version_id, CAST(%s AS INTEGER)) AS version_id, COALESCE(own.preview, %s) AS preview,
           {reason_sql} AS reason
    FROM {Recipient._meta.db_table} r
    LEFT JOIN {Preference._meta.db_table} p ON p.recipient_id = r.id AND p.kind_id = %s AND p.channel = %s
    LEFT JOIN ({templates_sql}) own ON own.language = r.language
    WHERE r.id > %s AND r.id <= %s AND r.id IN ({plan.audience_sql})"""
    params = [
        fallback_id, fallback_preview, *reason_params, campaign.kind_id, campaign.channel, *templates_params,
        after, upper, *plan.audience_params,
    ]  # fmt: skip
    return sql, params


def _select_new_notifications(plan: Plan, after: int, upper: int) -> tuple[str, list[Any]]:
    """The SELECT of one batch's rows: recipient × template of their language × policy verdict (the reason)."""
    campaign = plan.campaign
    postgres = connection.vendor == "postgresql"
    new_id = _UUID7 if postgres else "lower(hex(randomblob(16)))"
    as_json = "CAST(%s AS jsonb)" if postgres else "%s"
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    verdicts_sql, verdicts_params = verdicts(plan, after, upper)
    sql = f"""
SELECT {new_id}, %s || made.user_id, %s, '', made.recipient_id, %s, %s, %s,
       CASE WHEN made.reason = '' THEN {as_json} ELSE {as_json} END,
       CASE WHEN made.reason = '' THEN %s ELSE %s END,
       made.reason, made.version_id, made.preview, '', '', 0, 0, '', %s, %s, %s
FROM ({verdicts_sql}
) made
WHERE made.recipient_id IS NOT NULL"""
    params = [
        f"campaign:{campaign.pk}:", f"campaign:{campaign.pk}", campaign.kind_id, campaign.channel, Priority.STANDARD,
        plan.params_json, plan.masked_params_json, State.QUEUED, State.SUPPRESSED, now, now, campaign.pk,
        *verdicts_params,
    ]  # fmt: skip
    return sql, params


def _templates_table(plan: Plan) -> tuple[str, list[Any]]:
    """A derived table (language, version_id, preview), one row per language of the campaign."""
    rows = " UNION ALL ".join(
        "SELECT CAST(%s AS VARCHAR(8)) AS language, CAST(%s AS INTEGER) AS version_id,"
        " CAST(%s AS VARCHAR(200)) AS preview"
        for _ in plan.templates
    )
    params = [value for language, (pk, preview) in plan.templates.items() for value in (language, pk, preview)]
    return rows or "SELECT NULL AS language, NULL AS version_id, NULL AS preview", params


def _reason(plan: Plan) -> tuple[str, list[Any]]:
    """The policy verdict as a CASE: policy.route's rules for a requested channel, in its order; '' to send."""
    kind, channel = plan.campaign.kind, plan.campaign.channel
    whens: list[str] = []
    params: list[Any] = []
    if kind.opt_out_allowed:
        whens.append("WHEN p.enabled = %s THEN 'opted-out'")
        params.append(False)
    if channel in (Channel.EMAIL, Channel.SMS):
        email = channel == Channel.EMAIL
        address, disabled = ("email", "email_bounced_at") if email else ("phone", "phone_disabled_at")
        whens += [
            f"WHEN r.{address} = '' THEN 'no-address'",
            f"WHEN r.{disabled} IS NOT NULL THEN 'address-disabled'",
        ]
    if channel == Channel.PUSH:
        whens.append(
            f"WHEN NOT EXISTS (SELECT 1 FROM {Device._meta.db_table} d"
            f" WHERE d.recipient_id = r.id AND d.disabled_at IS NULL) THEN 'no-device'"
        )
    whens.append("WHEN COALESCE(own.version_id, CAST(%s AS INTEGER)) IS NULL THEN 'no-template'")
    params.append(plan.fallback[0] if plan.fallback else None)
    return f"CASE {' '.join(whens)} ELSE '' END", params


# --- 3. feed -------------------------------------------------------------------------------------


def feed(limit: int | None = None) -> int:
    """Hand queued rows of running campaigns to the standard tier, up to ``limit`` tasks waiting there; how many.

    ``limit`` defaults to ``NOTIFY_CAMPAIGN_FEED``. Each row's ``queued_at`` is set first, then
    its task enqueued: a task lost on the way (Redis down) is the sweeper's, as for any queued
    row. Raises ``RedisUnavailable`` when the queue cannot be read.
    """
    room = (limit or settings.NOTIFY["CAMPAIGN_FEED"]) - HUEYS[Priority.STANDARD].pending_count()
    running = list(Campaign.objects.filter(state=Campaign.State.RUNNING).values_list("pk", flat=True))
    if room <= 0 or not running:
        return 0
    waiting = Notification.objects.filter(campaign__in=running, state=State.QUEUED, queued_at__isnull=True)
    ids = list(waiting.order_by().values_list("pk", flat=True)[:room])
    Notification.objects.filter(pk__in=ids, state=State.QUEUED, queued_at__isnull=True).update(queued_at=timezone.now())
    for pk in ids:
        enqueue_delivery(str(pk), Priority.STANDARD, priority=CAMPAIGN_PRIORITY)
    return len(ids)


# --- 4. done -------------------------------------------------------------------------------------


def finish_done() -> list[int]:
    """Mark done every running campaign whose fan-out finished and which has nothing left to send; their ids."""
    finished = []
    for campaign in Campaign.objects.filter(state=Campaign.State.RUNNING, fanned_out_at__isnull=False):
        if Notification.objects.filter(campaign=campaign, state__in=UNFINISHED).exists():
            continue
        counts = dict(
            Notification.objects.filter(campaign=campaign).order_by().values_list("state").annotate(n=Count("pk"))
        )
        if actions.finish(campaign, counts):
            finished.append(campaign.pk)
    return finished


# --- the scheduler's loop ------------------------------------------------------------------------


def tick(batch: int = BATCH) -> bool:
    """One round of start → one fan-out batch per running campaign → feed → done; True if fan-out work is left."""
    start_due()
    more = False
    for campaign_id in Campaign.objects.filter(state=Campaign.State.RUNNING, fanned_out_at__isnull=True).values_list(
        "pk", flat=True
    ):
        more |= not fan_out(campaign_id, batch, max_batches=PARALLEL).complete
    feed()
    finish_done()
    return more


def run_forever() -> None:
    """``tick`` without end (the scheduler's campaign thread): at once while fan-out work is left, else each second.

    A failed tick (database or Redis restarting) is logged and tried again.
    """
    while True:
        try:
            more = tick()
        except Exception:
            logger.exception("campaign tick failed")
            more = False
        if not more:
            time.sleep(IDLE_SECONDS)
        close_old_connections()
