"""How a million rows are made: a running campaign's notifications, set-based in SQL, and their hand-over.

The scheduler process (``run_scheduler``) calls ``tick`` in a thread of its own, so a long
fan-out never delays its sweeps of the high tier. Each tick:

1. **start** — approved campaigns whose time came (``now``, or ``at`` an instant that passed)
   become ``running`` (``actions.start``, audited). A ``local_time`` campaign starts as soon as it
   is approved: its start instant (the ``start`` audit row) fixes every recipient's wave, the
   first instant at or after it when their clock shows the wall time (``waves.wave_instant``),
   and a ``schedule`` audit row records those waves (``start_due``).
2. **fan out** — one batch of recipients per running campaign (``fan_out``): one
   ``INSERT … SELECT … ON CONFLICT DO NOTHING`` makes a notification for each recipient of
   the batch, keyed ``campaign:<id>:<user id>`` in the scope ``campaign:<id>``, with the
   template version of the recipient's language (else the kind's default language), the
   preview rendered once per language (params are shared), and the policy applied in the same
   statement by joins: ``opted-out`` (a Preference off, for kinds users may opt out of), then
   ``no-address`` / ``address-disabled`` (email, SMS) or ``no-device`` (push) — the rules and
   reasons of ``policy.route`` — and ``no-template``; such rows are ``suppressed`` with their
   reason, then ``rate-limited`` (``NOTIFY_RATE_LIMITS`` of the kind's category, counted over the
   recipient's notifications in PostgreSQL, see ``_over_rate_limit_table``). When each row may go is
   worked out in Python once per distinct (time zone, quiet hours) of the batch and joined as a
   derived table (``timing_table``): its wave instant (local time) or now, moved to the end of
   the recipient's quiet hours when it falls inside them, and to the next opening of the
   campaign's sending hours when it falls outside them, the later of the two (``send_timing``);
   a spread campaign's row then gets its place in the spread (``pacing``). A row due later is
   ``scheduled`` (reason ``campaign-wave``, ``quiet-hours``, ``sending-hours`` or
   ``campaign-spread``, ``send_at`` its instant); one due at
   or after the campaign's ``end_at`` is ``expired`` at once (``campaign-ended``); the rest
   ``queued``. Their history rows are written by the same statement (PostgreSQL) or the next one
   in the same transaction (SQLite).
   **end** — before anything else is fed, a running campaign whose ``end_at`` came has its rows
   not yet handed over (queued, fed or not, and scheduled) expired set-based (``end_due``); a
   worker only claims a row still ``queued``, so a fed task of such a row is dropped.
   **release** — a campaign's ``scheduled`` rows whose ``send_at`` came are moved back to queued
   with ``queued_at`` NULL, set-based (``release_due``): the feeder then paces them like the rest.
   The sweeper leaves campaign rows to this tick, so a wave of a million rows never becomes a
   million tasks at once.
3. **feed** — queued campaign rows are handed to the standard tier only while its queue holds
   fewer than ``NOTIFY_CAMPAIGN_FEED`` tasks, at a lower Huey priority than transactional
   traffic of that tier (``feed``); that room is shared fairly between running campaigns, and
   a campaign with a rate gets at most rate × the time since its clock started (``pacing``).
   A row's ``queued_at`` stays NULL until then: the sweeper leaves such rows alone, and
   re-enqueues fed ones whose task was lost.
4. **done** — a running campaign whose fan-out finished and which has nothing queued,
   scheduled or sending becomes ``done`` (``actions.finish``, audited with the counts): one
   with a wave tomorrow stays running until that wave is sent.

**Pause** (``actions.pause``): every step above asks for a ``running`` campaign, so a paused one
is not fanned out, released, fed, ended or finished; its fed rows are un-fed (``queued_at`` NULL,
still ``queued``) and a worker claims a campaign's row only when fed and not paused
(``actions.claimable_campaign_row``). ``hold_paused`` un-feeds what a retry or the sweeper fed
during the pause. ``actions.resume`` makes it ``running`` again: the steps continue from what is
in PostgreSQL (the fan-out's mark, the rows still queued or scheduled), nothing kept in memory.

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
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from datetime import time as wall_time
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from backend.notifications import masking, metric_counters, quiet_hours
from backend.notifications.models import (
    Channel,
    Device,
    Kind,
    Notification,
    Preference,
    Priority,
    Recipient,
    State,
    StateChange,
    TemplateVersion,
)
from backend.notifications.policy import WINDOW_SECONDS
from backend.notifications.queues import HUEYS
from backend.notifications.tasks import enqueue_deliveries
from campaigns import actions, ledger, pacing, row_moves
from campaigns.audience import AudienceTimedOut, AudienceUnavailable, audience, ids_between, recipients
from campaigns.content_hash import campaign_hash
from campaigns.models import Campaign, CampaignAudit, ScheduleMode
from campaigns.waves import wave_instant, waves

logger = logging.getLogger(__name__)

BATCH = 50_000
# Batches made at once on connections of their own: one per core of the 2-core machine measured (README).
PARALLEL = 2
# Huey priority of campaign tasks: below transactional standard traffic (0), popped after it.
CAMPAIGN_PRIORITY = -1
# The reason of a scheduled campaign row released when its send_at came (as the sweeper's release).
RELEASED = "send-at-reached"
# Seconds the scheduler's campaign thread waits when a tick found no fan-out work left.
IDLE_SECONDS = 1.0
# What keeps a campaign from being done.
UNFINISHED = (State.QUEUED, State.SCHEDULED, State.SENDING)
# Why a row waits (``send_timing``), and why one is stopped at its campaign's end time.
WAVE, QUIET_HOURS, ENDED = "campaign-wave", "quiet-hours", "campaign-ended"


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
    templates: dict[str, tuple[int, str]]  # language → (version id, masked preview)
    fallback: tuple[int, str] | None  # the kind's default language
    params_json: str
    masked_params_json: str
    start: datetime | None = None  # the campaign's start instant (local-time waves count from it); None: now

    def audience_between(self, after: int, upper: int | None, ordered: bool = False) -> tuple[str, list[Any]]:
        """SQL (one column, ``member``) of the audience's recipient ids in (``after``, ``upper``], ordered if asked."""
        ids = ids_between(self.campaign.segment, after, upper)
        sql, params = (ids.order_by("member") if ordered else ids).query.sql_with_params()
        return sql, list(params)


# --- 1. start ------------------------------------------------------------------------------------


def due_campaigns(now: datetime) -> list[Campaign]:
    """Approved campaigns whose time came: ``now`` and ``local_time`` ones, and ``at`` ones whose instant passed.

    A ``local_time`` campaign starts at once: its waves are instants after its start, which the
    notifications wait for as ``scheduled`` rows (``send_timing``).
    """
    due = (
        Q(schedule_mode__in=(ScheduleMode.NOW, ScheduleMode.LOCAL_TIME))
        | Q(schedule_mode=ScheduleMode.AT, send_at__lte=now)
    )  # fmt: skip
    return list(Campaign.objects.filter(due, state=Campaign.State.APPROVED).order_by("pk"))


def start_due(now: datetime | None = None) -> list[int]:
    """Start every due campaign (``actions.start``); the ids of those this call started.

    A started ``local_time`` campaign also gets its ``schedule`` audit row: the waves of its
    audience as they stand at the start (``schedule_detail``).
    """
    started = []
    for campaign in due_campaigns(now or timezone.now()):
        # Counted before start's short transaction: a big segment's count holds no lock.
        try:
            found = audience(campaign.segment)
        except AudienceTimedOut as exc:
            logger.warning(
                "campaign %s: its audience could not be counted in time, tried again next tick: %s", campaign.pk, exc
            )
            continue
        except AudienceUnavailable as exc:  # a filter that no longer validates: it can never start as approved
            actions.refuse_start(campaign, str(exc))
            continue
        if not actions.start(campaign, found, campaign_hash(campaign, found)):
            continue
        if campaign.schedule_mode == ScheduleMode.LOCAL_TIME:
            actions.record_schedule(campaign, schedule_detail(campaign, started_at(campaign)))
        started.append(campaign.pk)
    return started


def started_at(campaign: Campaign) -> datetime | None:
    """When the scheduler started ``campaign`` (its ``start`` audit row); None if it has not started (or is unsaved)."""
    if campaign.pk is None:
        return None
    audit = CampaignAudit.objects.filter(campaign=campaign, action=CampaignAudit.Action.START)
    return audit.order_by("at").values_list("at", flat=True).first()


def schedule_detail(campaign: Campaign, start: datetime) -> dict[str, Any]:
    """A local-time campaign's waves from ``start``, as its ``schedule`` audit row keeps them (JSON-able).

    ``{"start": ISO Z, "local_time": "09:00", "end_at": ISO Z or None, "waves": [{"at": ISO Z,
    "utc_offset": "UTC+03:30", "zones": [...], "size": n}]}``, sizes counted per time zone of the
    audience in one query.
    """
    zones = dict(recipients(campaign.segment).order_by().values_list("time_zone").annotate(n=Count("pk")))
    return {
        "start": _iso(start),
        "local_time": campaign.local_time.strftime("%H:%M"),
        "end_at": _iso(campaign.end_at) if campaign.end_at else None,
        "waves": [wave.as_dict() for wave in waves(campaign.local_time, start, zones)],
    }


def _iso(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
    ids_between(campaign.segment, 0)  # a filter that no longer validates is refused here, before any batch
    return Plan(
        campaign=campaign,
        templates=templates,
        fallback=templates.get(kind.default_language),
        params_json=json.dumps(params),
        masked_params_json=json.dumps(masking.masked_params(kind, params)),
        start=started_at(campaign),
    )


def _lock_if_running(campaign_id: int) -> bool:
    """Lock the campaign's row for this batch (a cancel waits for it); False once it is no longer running."""
    return Campaign.objects.select_for_update(no_key=True).filter(pk=campaign_id, state=Campaign.State.RUNNING).exists()


def _batch_upper_bound(plan: Plan, after: int, batch: int) -> int | None:
    """The highest recipient id of the next ``batch`` audience members after ``after``; None when none is left."""
    ids_sql, ids_params = plan.audience_between(after, None, ordered=True)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MAX(next_batch.member) FROM ({ids_sql} LIMIT %s) next_batch",
            [*ids_params, batch],
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
            # One statement: the history of exactly the rows this INSERT made (RETURNING skips conflicts),
            # answering how many it made in each state.
            cursor.execute(
                f"WITH created AS ({insert} RETURNING id, state, reason),"
                f" history AS ({history} SELECT id, '', state, reason, %s FROM created)"
                f" SELECT state, COUNT(*) FROM created GROUP BY state",
                [*params, now],
            )
            made = dict(cursor.fetchall())
        else:
            cursor.execute(insert, params)
            new_rows = (
                f"FROM {Notification._meta.db_table} n WHERE n.campaign_id = %s AND n.recipient_id > %s"
                f" AND n.recipient_id <= %s"
                f" AND NOT EXISTS (SELECT 1 FROM {StateChange._meta.db_table} s WHERE s.notification_id = n.id)"
            )
            cursor.execute(f"SELECT n.state, COUNT(*) {new_rows} GROUP BY n.state", [plan.campaign.pk, after, upper])
            made = dict(cursor.fetchall())
            cursor.execute(
                f"{history} SELECT n.id, '', n.state, n.reason, %s {new_rows}", [now, plan.campaign.pk, after, upper]
            )
    counts: Counter = Counter()
    for state, count in made.items():
        counts.update(metric_counters.entered(Priority.STANDARD, "", state, count))
    metric_counters.add(counts)
    return sum(made.values())


# A UUIDv7 (RFC 9562 §5.7: 48-bit Unix ms, version 7, variant 10, random bits) built in SQL (PostgreSQL 15
# has no uuidv7()): a batch's keys land side by side in the primary-key index instead of all over it, which
# made a 300,000-row fan-out 14 % faster than gen_random_uuid() here. Built as two bigints, not text: the
# high one is ms << 16 | version 7 << 12 | 12 random bits; the low one is the variant (its top bits 10, so
# -2^63 + a value below 2^62) and 62 random bits, from two random() calls (52 bits each at most). md5() of
# random() as hex text cost 2.4 s of CPU a million rows, these 0.7 s.
_UUID7 = (
    "CAST(encode(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint * 65536 + 28672"
    " + floor(random() * 4096)::bigint)"
    " || int8send(floor(random() * 4503599627370496)::bigint * 1024 + floor(random() * 1024)::bigint"
    " - 9223372036854775807 - 1), 'hex') AS uuid)"
)

_INSERT_NOTIFICATIONS = """
INSERT INTO {notification} (
    id, idempotency_key, idempotency_scope, request_hash, recipient_id, kind_id, channel, priority, params,
    state, reason, template_version_id, preview, provider, provider_ref, attempt_count, replayed_attempts,
    last_error, created_at, updated_at, campaign_id, send_at, expired_at
)"""


def verdicts(plan: Plan, after: int, upper: int, now: datetime | None = None) -> tuple[str, list[Any]]:
    """SQL (and its params) of one verdict row per audience member ``after`` < id ≤ ``upper``: what the fan-out makes.

    Columns: ``recipient_id``, ``user_id``, ``language``, ``time_zone``, ``phone``, ``version_id``
    (the template version of their language, else the kind's default language; NULL when none),
    ``preview`` (masked, rendered once per language) and ``reason`` (the policy stop, '' to send:
    the stops of ``policy.route``, ``no-template``, ``rate-limited``, or ``campaign-ended`` when the
    row would be due at or after the campaign's ``end_at``); for a row with reason '' or
    ``campaign-ended``, ``send_at`` (when it may go, NULL for at once ``now``) and ``delay`` (why
    it waits: ``campaign-wave``, ``quiet-hours``, ``sending-hours``, ``campaign-spread`` or ''). The
    fan-out inserts these rows; the
    pre-flight (``preflight.py``) groups them without inserting, so its counts are the fan-out's
    by construction. Runs one query (the batch's distinct time zones and quiet hours).
    """
    campaign = plan.campaign
    now = now or timezone.now()
    templates_sql, templates_params = _templates_table(plan)
    timing_sql, timing_params = timing_table(plan, after, upper, now)
    rate = _over_rate_limit_table(plan, after, upper, now)
    rate_sql, rate_params = rate or ("SELECT CAST(NULL AS BIGINT) AS recipient_id WHERE 1 = 0", [])
    reason_sql, reason_params = _reason(plan, now, rate_limited=rate is not None)
    when_sql, when_params = _spread_timing(plan, now)
    fallback_id, fallback_preview = plan.fallback or (None, "")
    ids_sql, ids_params = plan.audience_between(after, upper)
    sql = f"""
    SELECT r.id AS recipient_id, r.user_id, r.language, r.time_zone, r.phone,
           COALESCE(own.version_id, CAST(%s AS INTEGER)) AS version_id, COALESCE(own.preview, %s) AS preview,
           {reason_sql} AS reason, {when_sql}
    FROM {Recipient._meta.db_table} r
    LEFT JOIN {Preference._meta.db_table} p ON p.recipient_id = r.id AND p.kind_id = %s AND p.channel = %s
    LEFT JOIN ({templates_sql}) own ON own.language = r.language
    LEFT JOIN ({rate_sql}) over_limit ON over_limit.recipient_id = r.id
    LEFT JOIN ({timing_sql}) t ON t.time_zone = r.time_zone AND t.quiet_start = {_quiet_key("start")}
         AND t.quiet_end = {_quiet_key("end")}
    WHERE r.id > %s AND r.id <= %s AND r.id IN ({ids_sql})"""
    params = [
        fallback_id, fallback_preview, *reason_params, *when_params, campaign.kind_id, campaign.channel,
        *templates_params,
        *rate_params, *timing_params, after, upper, *ids_params,
    ]  # fmt: skip
    return sql, params


def _spread_timing(plan: Plan, now: datetime) -> tuple[str, list[Any]]:
    """The ``send_at`` and ``delay`` columns of the verdicts: the timing table's, or a spread campaign's place.

    A row due at once or at its wave goes at that instant + its spread offset
    (``pacing.spread_sql``), reason ``campaign-spread``; one held by quiet hours keeps their end.
    """
    plain = "t.send_at AS send_at, COALESCE(t.delay, '') AS delay"
    start = plan.start or now
    window = pacing.spread_window(plan.campaign, start)
    if window is None:
        return plain, []
    instant = "CAST(%s AS TIMESTAMP WITH TIME ZONE)" if connection.vendor == "postgresql" else "%s"
    spread = pacing.spread_sql(f"COALESCE(t.send_at, {instant})", "r.id")
    spreads = f"COALESCE(t.delay, '') IN ('', '{WAVE}')"
    sql = (
        f"CASE WHEN {spreads} THEN {spread} ELSE t.send_at END AS send_at,"
        f" CASE WHEN {spreads} THEN '{pacing.SPREAD}' ELSE t.delay END AS delay"
    )
    return sql, [connection.ops.adapt_datetimefield_value(start), window]


def _select_new_notifications(plan: Plan, after: int, upper: int) -> tuple[str, list[Any]]:
    """The SELECT of one batch's rows: recipient × template of their language × policy verdict × timing."""
    campaign = plan.campaign
    postgres = connection.vendor == "postgresql"
    new_id = _UUID7 if postgres else "lower(hex(randomblob(16)))"
    as_json = "CAST(%s AS jsonb)" if postgres else "%s"
    moment = timezone.now()
    now = connection.ops.adapt_datetimefield_value(moment)
    verdicts_sql, verdicts_params = verdicts(plan, after, upper, moment)
    # The OFFSET keeps the verdicts a subquery of their own: pulled up into this SELECT, their reason
    # CASE was computed once per reference below, seven times a row (a correlated subquery in it made
    # a 20,000-row batch's SELECT 1.6 s instead of 0.4 s).
    sql = f"""
SELECT {new_id}, %s || made.user_id, %s, '', made.recipient_id, %s, %s, %s,
       CASE WHEN made.reason = '' THEN {as_json} ELSE {as_json} END,
       CASE WHEN made.reason = %s THEN %s WHEN made.reason <> '' THEN %s WHEN made.delay <> '' THEN %s ELSE %s END,
       CASE WHEN made.reason = '' THEN made.delay ELSE made.reason END,
       made.version_id, made.preview, '', '', 0, 0, '', %s, %s, %s,
       CASE WHEN made.reason IN ('', %s) THEN made.send_at END,
       CASE WHEN made.reason = %s THEN %s END
FROM ({verdicts_sql}
    {"OFFSET 0" if postgres else "LIMIT -1 OFFSET 0"}
) made
WHERE made.recipient_id IS NOT NULL"""
    params = [
        f"campaign:{campaign.pk}:", f"campaign:{campaign.pk}", campaign.kind_id, campaign.channel, Priority.STANDARD,
        plan.params_json, plan.masked_params_json,
        ENDED, State.EXPIRED, State.SUPPRESSED, State.SCHEDULED, State.QUEUED,
        now, now, campaign.pk, ENDED, ENDED, now,
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


def _reason(plan: Plan, now: datetime, rate_limited: bool) -> tuple[str, list[Any]]:
    """The policy verdict as a CASE: policy.route's rules for a requested channel, in its order; '' to send.

    Then ``no-template``, ``rate-limited`` (the ``over_limit`` table, when ``rate_limited``) and
    ``campaign-ended`` (the timing table's ``ended``; a recipient missing from it, whose time zone
    or quiet hours changed since it was made, is due ``now``).
    """
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
    if rate_limited:
        whens.append("WHEN over_limit.recipient_id IS NOT NULL THEN 'rate-limited'")
    end_at = plan.campaign.end_at
    whens.append(f"WHEN COALESCE(t.ended, %s) = 1 THEN '{ENDED}'")
    params.append(int(end_at is not None and now >= end_at))
    return f"CASE {' '.join(whens)} ELSE '' END", params


def _over_rate_limit_table(plan: Plan, after: int, upper: int, now: datetime) -> tuple[str, list[Any]] | None:
    """A derived table (recipient_id) of recipients ``after`` < id ≤ ``upper`` at a rate limit; None without limits.

    The limits are the live path's (``NOTIFY_RATE_LIMITS``, ``policy.decide``): at most N
    notifications of the kind's category per hour / M per day for a recipient. The live path
    counts in Redis, the fan-out counts the same events in PostgreSQL: the recipient's
    standard-priority notifications of the category made in each window that the policy let
    through (not ``suppressed``), other campaigns' included, this campaign's own left out (a
    re-run batch). The live path counts campaign rows likewise (``policy.campaign_events``), so
    both agree. One range scan of the (recipient, created_at) index for the whole batch: a
    subquery per recipient took a fifth of a batch's time.
    """
    kind = plan.campaign.kind
    limits = sorted(
        (WINDOW_SECONDS[unit], limit) for unit, limit in settings.NOTIFY["RATE_LIMITS"].get(kind.category, {}).items()
    )
    limits = [(seconds, limit) for seconds, limit in limits if limit > 0]
    if not limits:
        return None
    full = " OR ".join("SUM(CASE WHEN n.created_at > %s THEN 1 ELSE 0 END) >= %s" for _ in limits)
    params: list[Any] = []
    for seconds, limit in limits:
        params += [connection.ops.adapt_datetimefield_value(now - timedelta(seconds=seconds)), limit]
    widest = connection.ops.adapt_datetimefield_value(now - timedelta(seconds=limits[-1][0]))
    sql = (
        f"SELECT n.recipient_id FROM {Notification._meta.db_table} n JOIN {Kind._meta.db_table} k ON k.id = n.kind_id"
        f" WHERE n.recipient_id > %s AND n.recipient_id <= %s AND n.created_at > %s AND k.category = %s"
        f" AND n.priority = %s AND n.state <> %s AND (n.campaign_id IS NULL OR n.campaign_id <> %s)"
        f" GROUP BY n.recipient_id HAVING {full}"
    )
    where = [after, upper, widest, kind.category, Priority.STANDARD, State.SUPPRESSED, plan.campaign.pk or 0]
    return sql, [*where, *params]


# --- when each row may go ------------------------------------------------------------------------


def _quiet_key(bound: str) -> str:
    """The join key of a recipient's quiet-hours ``bound`` (start or end): the column, NULL as a value no bound has.

    PostgreSQL's TIME holds 24:00, which no wall time of Python (nor of the API) is; SQLite keeps
    times as text. The column is compared as it is stored: casting it per row made the join
    take most of a batch's SELECT.
    """
    unset = "TIME '24:00'" if connection.vendor == "postgresql" else "''"
    return f"COALESCE(r.quiet_hours_{bound}, {unset})"


def _quiet_key_param(value: wall_time | str | None) -> Any:
    """The ``_quiet_key`` of a bound read back from the database (a time, or SQLite's text)."""
    if value is None:
        return "24:00" if connection.vendor == "postgresql" else ""
    return value if isinstance(value, str) else connection.ops.adapt_timefield_value(value)


@dataclass(frozen=True)
class Timing:
    """When a campaign's notification may go: ``send_at`` (None: at once), ``delay`` (why it waits, or '').

    ``ended``: that instant is at or after the campaign's end time, so it is never sent.
    """

    send_at: datetime | None
    delay: str
    ended: bool


def send_timing(
    *,
    now: datetime,
    zone: str,
    quiet_start: wall_time | None,
    quiet_end: wall_time | None,
    local_time: wall_time | None = None,
    start: datetime | None = None,
    end_at: datetime | None = None,
    sending_hours: tuple[wall_time, wall_time] | None = None,
) -> Timing:
    """When a recipient in ``zone`` with quiet hours [quiet_start, quiet_end) gets a campaign's notification.

    Due at its wave (``waves.wave_instant(local_time, start, zone)``) for a local-time campaign,
    else ``now``; a wave already past is due ``now``. If that instant falls inside the quiet hours
    it moves to their end (``quiet_hours.quiet_hours_end``, exact across midnight and DST), as
    ``policy.decide`` does for standard traffic; if it falls outside the campaign's daily
    ``sending_hours`` (start, end) it moves to their next opening (``pacing.hours_open``); when
    both hold it, the later of the two wins (``_held``). ``ended`` when the instant is at or after
    ``end_at``. Aware datetimes in, UTC out; an unknown zone counts as UTC (as in ``waves``).
    """
    zone = _known_zone(zone)
    due, delay = now, ""
    if local_time is not None:
        wave = wave_instant(local_time, start or now, zone)
        if wave > now:
            due, delay = wave, WAVE
    due, delay = _held(due, delay, zone, (quiet_start, quiet_end), sending_hours or (None, None))
    return Timing(due.astimezone(UTC) if delay else None, delay, end_at is not None and due >= end_at)


# Moves of ``_held`` at most: quiet hours and sending hours are daily, so the later of the two settles it in two.
_HOLD_ROUNDS = 4


def _held(due: datetime, delay: str, zone: str, quiet: tuple, hours: tuple) -> tuple[datetime, str]:
    """``due`` moved past the quiet hours and into the sending hours, the later of the two each round, and why."""
    for _ in range(_HOLD_ROUNDS):
        quiet_end = quiet_hours.quiet_hours_end(due, zone, *quiet)
        opening = pacing.hours_open(due, zone, *hours)
        if quiet_end is None and opening is None:
            break
        if opening is not None and (quiet_end is None or opening > quiet_end):
            due, delay = opening, pacing.SENDING_HOURS
        else:
            due, delay = quiet_end, QUIET_HOURS
    return due, delay


def _known_zone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return "UTC"
    return name


def timing_table(plan: Plan, after: int, upper: int, now: datetime) -> tuple[str, list[Any]]:
    """A derived table (time_zone, quiet_start, quiet_end, send_at, delay, ended), one row per distinct
    (time zone, quiet hours) of the audience members ``after`` < id ≤ ``upper``: ``send_timing`` of each.

    The quiet-hours columns are the join keys (``_quiet_key``); one query reads the distinct triples.
    """
    campaign = plan.campaign
    local_time = campaign.local_time if campaign.schedule_mode == ScheduleMode.LOCAL_TIME else None
    hours = (campaign.sending_hours_start, campaign.sending_hours_end)
    hours = None if None in hours else hours
    postgres = connection.vendor == "postgresql"
    instant, wall = ("CAST(%s AS TIMESTAMP WITH TIME ZONE)", "CAST(%s AS TIME)") if postgres else ("%s", "%s")
    row = (
        f"SELECT CAST(%s AS VARCHAR(64)) AS time_zone, {wall} AS quiet_start, {wall} AS quiet_end,"
        f" {instant} AS send_at, CAST(%s AS VARCHAR(16)) AS delay, CAST(%s AS INTEGER) AS ended"
    )
    rows, params = [], []
    for zone, quiet_start, quiet_end in _distinct_zones_and_quiet_hours(plan, after, upper):
        timing = send_timing(
            now=now, zone=zone, quiet_start=_wall(quiet_start), quiet_end=_wall(quiet_end), local_time=local_time,
            start=plan.start, end_at=campaign.end_at, sending_hours=hours,
        )  # fmt: skip
        rows.append(row)
        send_at = connection.ops.adapt_datetimefield_value(timing.send_at) if timing.send_at else None
        params += [zone, _quiet_key_param(quiet_start), _quiet_key_param(quiet_end), send_at, timing.delay,
                   int(timing.ended)]  # fmt: skip
    # No member in the range: a typed table without rows.
    return (" UNION ALL ".join(rows), params) if rows else (f"{row} WHERE 1 = 0", [None] * 6)


def _distinct_zones_and_quiet_hours(plan: Plan, after: int, upper: int) -> list[tuple[str, Any, Any]]:
    """The distinct (time zone, quiet hours start, end) of the audience members ``after`` < id ≤ ``upper``.

    The bounds as the database gives them back: a time (SQLite: maybe its text), or None.
    """
    ids_sql, ids_params = plan.audience_between(after, upper)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT r.time_zone, r.quiet_hours_start, r.quiet_hours_end"
            f" FROM {Recipient._meta.db_table} r WHERE r.id > %s AND r.id <= %s AND r.id IN ({ids_sql})",
            [after, upper, *ids_params],
        )
        return cursor.fetchall()


def _wall(value: wall_time | str | None) -> wall_time | None:
    """A quiet-hours bound read back from the database as a wall time."""
    return wall_time.fromisoformat(value) if isinstance(value, str) else value


# --- 3. feed -------------------------------------------------------------------------------------


def feed(limit: int | None = None) -> int:
    """Hand queued rows of running campaigns to the standard tier, up to ``limit`` tasks waiting there; how many.

    ``limit`` defaults to ``NOTIFY_CAMPAIGN_FEED``. The room left in the queue is shared fairly
    between the running campaigns with rows waiting (``pacing.fair_split``), each campaign with a
    rate getting no more than its rate allows since its clock (``_paced``). Each row's
    ``queued_at`` is set first, then its task enqueued: a task lost on the way (Redis down) is
    the sweeper's, as for any queued row. Raises ``RedisUnavailable`` when the queue cannot be read.
    """
    room = (limit or settings.NOTIFY["CAMPAIGN_FEED"]) - HUEYS[Priority.STANDARD].pending_count()
    if room <= 0:
        return 0
    now = timezone.now()
    not_ended = Q(end_at__isnull=True) | Q(end_at__gt=now)
    with transaction.atomic():
        # The campaigns' row locks, held until the rows are marked: a cancel (FOR UPDATE) waits for this
        # feed and then stops what it marked, or this feed waits for the cancel and no longer sees the campaign.
        running = _lock_running(Campaign.objects.filter(not_ended, state=Campaign.State.RUNNING))
        waiting, clocks = {}, {}
        for campaign in Campaign.objects.filter(pk__in=running).order_by("pk"):
            cap, clocks[campaign.pk] = _paced(campaign, room, now)
            # "state BETWEEN 'queued' AND 'queued'": the campaign index still reads it as a range of its state
            # column, but it no longer implies the tier-queue index's condition (state = 'queued'), whose
            # "queued_at IS NULL" entries are every campaign's unfed rows. Statistics taken before the
            # campaigns (no queued row) made PostgreSQL walk that index through a paused or older campaign's
            # rows to reach this one's: 111 ms a tick behind 1,000,000 of them, 1 ms by the campaign index.
            rows = Notification.objects.filter(
                campaign=campaign, state__range=(State.QUEUED, State.QUEUED), queued_at__isnull=True
            )
            waiting[campaign.pk] = list(rows.order_by().values_list("pk", flat=True)[:cap]) if cap > 0 else []
        shares = pacing.fair_split({pk: len(ids) for pk, ids in waiting.items()}, room)
        ids = [pk for campaign, share in shares.items() for pk in waiting[campaign][:share]]
        Notification.objects.filter(pk__in=ids, state=State.QUEUED, queued_at__isnull=True).update(queued_at=now)
        for campaign, clock in clocks.items():
            if clock is not None:
                paced_from, paced_count = clock
                Campaign.objects.filter(pk=campaign).update(
                    paced_from=paced_from, paced_count=paced_count + shares[campaign]
                )
    enqueue_deliveries([str(pk) for pk in ids], Priority.STANDARD, priority=CAMPAIGN_PRIORITY)
    return len(ids)


def _paced(campaign: Campaign, room: int, now: datetime) -> tuple[int, tuple[datetime, int] | None]:
    """Rows ``campaign`` may be fed now (at most ``room``), and its rate clock to store (None: it has no rate).

    The clock is kept on the campaign's row in PostgreSQL (``paced_from``, ``paced_count``), so a
    restarted scheduler keeps the pace; ``pacing.allowance`` says how much is due.
    """
    rate = pacing.effective_rate(campaign)
    if rate is None:
        return room, None
    allowed, paced_from, paced_count = pacing.allowance(rate, campaign.paced_from, campaign.paced_count, now)
    return min(room, allowed), (paced_from, paced_count)


# --- release and end: set-based moves of a campaign's rows, with their history -------------------


def release_due(now: datetime | None = None, limit: int = BATCH) -> int:
    """Move up to ``limit`` scheduled rows of running campaigns whose ``send_at`` came back to queued; how many.

    Their ``queued_at`` is NULL, so the feeder hands them over at its pace (``feed``); reason
    ``send-at-reached`` as the sweeper's release, one history row each. A row a cancel or an end
    moved meanwhile is left as it is (the UPDATE re-checks its state).
    """
    now = now or timezone.now()
    notification = Notification._meta.db_table
    due = (
        f"SELECT d.id FROM {notification} d WHERE d.state = %s AND d.send_at <= %s"
        f" AND d.campaign_id IN (SELECT c.id FROM {Campaign._meta.db_table} c WHERE c.state = %s)"
        f" LIMIT %s"
    )
    at = connection.ops.adapt_datetimefield_value(now)
    due_params = [State.SCHEDULED, at, Campaign.State.RUNNING, limit]
    moves = "state = %s, queued_at = NULL, reason = %s, updated_at = %s"
    move_params = [State.QUEUED, RELEASED, at]
    return row_moves.move_with_history(due, due_params, moves, move_params, State.SCHEDULED, State.QUEUED, RELEASED, at)


def end_due(now: datetime | None = None, limit: int = BATCH) -> list[int]:
    """Expire what running campaigns whose ``end_at`` came have not handed over; the ids of those now fully ended.

    Rows already fed (a task waits in the queue) go first, all at once: at most
    ``NOTIFY_CAMPAIGN_FEED`` of them, so nothing more is handed over within the tick; then up to
    ``limit`` of the rest (queued or scheduled) per campaign and call. ``expired``, reason
    ``campaign-ended``, with history rows. When none is left, the ``end`` audit row is written once
    (``actions.record_end``). Runs under the campaign's row lock, so a fan-out batch under way
    finishes first (its rows made after the end are expired at creation).
    """
    now = now or timezone.now()
    ended = []
    for campaign in Campaign.objects.filter(state=Campaign.State.RUNNING, end_at__lte=now).order_by("pk"):
        with transaction.atomic():
            if not _lock_if_running(campaign.pk):
                continue
            row_moves.stop_unsent(campaign.pk, State.EXPIRED, ENDED, now, fed_only=True, stamp="expired_at")
            row_moves.stop_unsent(campaign.pk, State.EXPIRED, ENDED, now, limit=limit, stamp="expired_at")
            left = row_moves.any_in(campaign.pk, row_moves.UNSENT)
            if (
                not left
                and not CampaignAudit.objects.filter(campaign=campaign, action=CampaignAudit.Action.END).exists()
            ):
                actions.record_end(campaign, _end_detail(campaign))
                ended.append(campaign.pk)
    return ended


def _end_detail(campaign: Campaign) -> dict[str, Any]:
    counts = Notification.objects.filter(campaign=campaign).order_by().values_list("state").annotate(n=Count("pk"))
    return {"end_at": _iso(campaign.end_at), "counts": dict(counts)}


def _lock_running(campaigns: QuerySet[Campaign]) -> list[int]:
    """The ids of ``campaigns``, their rows locked ``FOR KEY SHARE`` until the transaction ends (PostgreSQL).

    That lock waits for a cancel (``FOR UPDATE``) and makes it wait, but not a fan-out batch
    (``FOR NO KEY UPDATE``), so feeding never waits for a batch under way. SQLite has one writer
    at a time: no lock needed.
    """
    sql, params = campaigns.order_by("pk").values("pk").query.sql_with_params()
    lock = " FOR KEY SHARE" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(f"{sql}{lock}", params)
        return [pk for (pk,) in cursor.fetchall()]


def hold_paused() -> int:
    """Un-feed the rows of paused campaigns that were fed again since their pause; how many.

    ``actions.pause`` un-fed every row a worker could claim; a row in flight then that failed
    and was queued for a retry, or that the sweeper released after its worker died, has
    ``queued_at`` set again. The claim refuses a paused campaign's rows anyway
    (``actions.claimable_campaign_row``); this keeps them un-fed, as the resume expects (the
    sweeper re-enqueues fed rows whose task it misses).
    """
    return sum(actions.unfeed(campaign) for campaign in Campaign.objects.filter(state=Campaign.State.PAUSED))


def stop_cancelled(limit: int = BATCH) -> int:
    """Write ``cancelled`` on up to ``limit`` rows of cancelled campaigns that have no task yet; how many.

    ``actions.cancel`` stopped every row a worker could claim in its transaction and counted the
    rest cancelled; nothing feeds, releases or retries rows of a cancelled campaign, so writing
    their state in chunks here (with history rows) changes no outcome, only how long a cancel of
    a million rows holds its locks.
    """
    stopped = 0
    now = timezone.now()
    pending = Notification.objects.filter(campaign=OuterRef("pk"), state__in=row_moves.UNSENT)
    for campaign in Campaign.objects.filter(Exists(pending), state=Campaign.State.CANCELLED).order_by("pk"):
        stopped += ledger.stop_unsent(campaign, now, limit=limit - stopped)
        if stopped >= limit:
            break
    return stopped


# --- 4. done -------------------------------------------------------------------------------------


def finish_done() -> list[int]:
    """Mark done every running campaign whose fan-out finished and which has nothing left to send; their ids."""
    finished = []
    for campaign in Campaign.objects.filter(state=Campaign.State.RUNNING, fanned_out_at__isnull=False):
        if row_moves.any_in(campaign.pk, UNFINISHED):
            continue
        counts = dict(
            Notification.objects.filter(campaign=campaign).order_by().values_list("state").annotate(n=Count("pk"))
        )
        if actions.finish(campaign, counts):
            finished.append(campaign.pk)
    return finished


# --- the scheduler's loop ------------------------------------------------------------------------


def tick(batch: int = BATCH) -> bool:
    """One round of start → end → one fan-out batch per running campaign → release → hold paused → feed → done.

    True if work is left for at once: fan-out batches, or a full batch of released rows. The end
    comes before the feed, so a campaign whose end time came gets nothing more fed.
    """
    start_due()
    end_due(limit=batch)
    more = False
    for campaign_id in Campaign.objects.filter(state=Campaign.State.RUNNING, fanned_out_at__isnull=True).values_list(
        "pk", flat=True
    ):
        more |= not fan_out(campaign_id, batch, max_batches=PARALLEL).complete
    more |= release_due(limit=batch) >= batch
    more |= stop_cancelled(limit=batch) >= batch
    hold_paused()
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
