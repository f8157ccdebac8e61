"""Campaign pacing: spread over a window, a per-campaign rate shared fairly, and daily sending hours.

Four optional fields of ``Campaign`` (all in the approved content hash when set,
``content_hash._pacing``):

* **spread** — ``spread_seconds`` ("over the next N hours") or ``spread_until`` (an instant):
  at fan-out each row due at once (or at its local-time wave) gets its own ``send_at`` inside
  the window that starts at the campaign's start (or at its wave), at the offset
  ``frac(recipient id × φ⁻¹) × window`` (a golden-ratio Weyl sequence: low discrepancy, so any
  stretch of the window holds its share of the rows), state ``scheduled``, reason
  ``campaign-spread`` (``spread_sql``). The scheduler's ``release_due`` hands them over as their
  time comes, so the pace survives any restart: it is in the rows. A row held by the user's
  quiet hours goes at their end instead (their wish wins over the spread).
* **rate** — ``rate_per_second``: ``fanout.feed`` hands a running campaign at most
  ``rate × (now − paced_from) − paced_count`` rows (``allowance``), the clock kept on the
  campaign's row in PostgreSQL; never above the channel's standard-tier budget
  (``effective_rate``). Credit over ``BURST_SECONDS`` of the rate is dropped, so an idle
  spell (a pause, a wave tomorrow) is not made up by a burst.
* **fair share** — the standard queue's room is split between running campaigns with work
  by max-min fairness (``fair_split``): each gets an equal share, and what one cannot use
  (its rate or its rows run out) goes to the others; no campaign starves another.
* **sending hours** — ``sending_hours_start`` / ``sending_hours_end``, a daily window in each
  recipient's local time (it may span midnight): a row due outside it waits ``scheduled``,
  reason ``sending-hours``, for the next opening (``hours_open``, exact across DST); combined
  with the user's own quiet hours the later of the two wins (``fanout.send_timing``).

The rules an author must keep (``pacing_problem``): one kind of spread, a window > 0 and at most
``MAX_SPREAD_SECONDS``, an ``until`` in the future (after ``send_at``), a rate of at least one
message an hour, at most ``MAX_RATE`` and ≤ the channel's budget, both
sending-hours bounds or neither and not equal. A spread does not combine with sending hours
(the per-row offset is worked out in SQL, the local window in Python per zone: a spread row
could land outside the hours), nor ``spread_until`` with local-time waves (say "over N hours":
each wave spreads over it).
"""

import math
from collections.abc import Mapping
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.db import connection
from django.db.models import F
from django.utils import timezone

from backend.notifications.models import Notification, State
from backend.notifications.providers.config import providers_config
from backend.notifications.quiet_hours import in_window, next_wall_time
from campaigns.models import Campaign, ScheduleMode

# Why a row waits: its place in the campaign's spread, or its recipient's sending hours.
SPREAD, SENDING_HOURS = "campaign-spread", "sending-hours"
# φ⁻¹: frac(n × φ⁻¹) for n = 1, 2, 3… fills [0, 1) as evenly as any sequence can (Weyl, three-distance theorem).
GOLDEN = 0.6180339887498949
# Seconds of unused rate a campaign may carry: more than the scheduler's tick (its 1 s sleep + the tick's work),
# else a tick a little late loses credit (5 % at 1.05 s: measured 950 of 1,000 over 20 s); less than a catch-up.
BURST_SECONDS = 2.0
# Seconds of the rate a new or restarted clock hands over at once.
RESTART_SECONDS = 1.0
# The longest spread: what spread_seconds' PostgreSQL integer column holds (68 years); past it the save was a 500.
MAX_SPREAD_SECONDS = 2**31 - 1
# The slowest rate, messages/second: one an hour. Slower, the rate clock's 1/rate seconds and the pre-flight's
# size/rate overflow a datetime (1e-300/s crashed submit, and would have crashed the feeder of every campaign).
MIN_RATE = 1 / 3600
# The fastest rate, messages/second, for a channel whose provider has no budget to cap it: far above any provider.
# 1e308/s passed and overflowed the feeder's credit (rate × seconds) to infinity: every tick failed, for every campaign.
MAX_RATE = 1_000_000


def standard_budget(channel: str) -> float | None:
    """Messages/second the standard tier may send on ``channel``'s primary provider; None when it has no rate.

    The providers file's ``rate × (1 − high_share)``, as ``delivery.budget`` splits it.
    """
    config = providers_config()
    names = config.routes.get(channel) or []
    provider = config.providers.get(names[0]) if names else None
    if provider is None or not provider.rate:
        return None
    budget = provider.rate * (1 - provider.high_share)
    return int(budget) if budget == int(budget) else round(budget, 3)


# --- what an author must keep --------------------------------------------------------------------


def pacing_problem(campaign: Campaign, now: datetime) -> tuple[str, str] | None:
    """The field at fault and why, when ``campaign``'s pacing cannot be sent as asked; None when it can."""
    return _spread_problem(campaign, now) or _rate_problem(campaign) or _hours_problem(campaign)


def _spread_problem(campaign: Campaign, now: datetime) -> tuple[str, str] | None:
    seconds, until = campaign.spread_seconds, campaign.spread_until
    if seconds is not None and until is not None:
        return "spread_until", 'Spread either "over the next N hours" or "until" an instant, not both.'
    if seconds is not None and seconds <= 0:
        return "spread_seconds", "A spread window is longer than 0 seconds."
    if seconds is not None and seconds > MAX_SPREAD_SECONDS:
        return "spread_seconds", f"A spread window is at most {MAX_SPREAD_SECONDS:,} seconds (68 years)."
    if until is not None:
        if timezone.is_naive(until):
            return "spread_until", "The spread end (spread_until) needs a time zone (e.g. 2026-12-01T18:00:00Z)."
        if until <= now or (campaign.send_at is not None and until <= campaign.send_at):
            return "spread_until", "The spread end (spread_until) must come after the campaign starts."
        if campaign.schedule_mode == ScheduleMode.LOCAL_TIME:
            return (
                "spread_until",
                'With local-time waves give the spread as "over the next N hours": each wave spreads over it.',
            )
        if (until - (campaign.send_at or now)).total_seconds() > MAX_SPREAD_SECONDS:
            return "spread_until", "The spread end (spread_until) is at most 68 years after the campaign starts."
    spread = seconds is not None or until is not None
    if spread and campaign.sending_hours_start is not None:
        return "spread_seconds", "A spread cannot be combined with sending hours: pick one of the two."
    return None


def _rate_problem(campaign: Campaign) -> tuple[str, str] | None:
    rate = campaign.rate_per_second
    if rate is None:
        return None
    if not math.isfinite(rate) or rate <= 0:
        return "rate_per_second", "A rate is more than 0 messages a second."
    if rate < MIN_RATE:
        return "rate_per_second", "A rate is at least 1 message an hour."
    if rate > MAX_RATE:
        return "rate_per_second", f"A rate is at most {MAX_RATE:,} messages a second."
    budget = standard_budget(campaign.channel)
    if budget is not None and rate > budget:
        return "rate_per_second", (
            f"{rate_words(rate)} is above the {campaign.channel} provider budget of {budget:g} a second."
        )
    return None


def _hours_problem(campaign: Campaign) -> tuple[str, str] | None:
    start, end = campaign.sending_hours_start, campaign.sending_hours_end
    if (start is None) != (end is None):
        return "sending_hours", "Give sending hours as a start and an end time, e.g. 09:00–20:00, or neither."
    if start is not None and (start.tzinfo is not None or end.tzinfo is not None):
        return "sending_hours", "Give sending hours as wall times without a UTC offset: each recipient's zone applies."
    if start is not None and start == end:
        return "sending_hours", "Sending hours start and end at different times (e.g. 09:00–20:00)."
    return None


def describe(campaign: Campaign) -> str:
    """The pacing in words for the review page and the PDF report; "" when the campaign has none.

    ``spread over 10 h · at most 1,800 messages/h · sending hours 09:00–20:00 in each recipient's local time``:
    every digit of the rate as given (``rate_amount``), thousands grouped as ``rate_words`` groups them.
    """
    parts = []
    if campaign.spread_seconds is not None:
        parts.append(f"spread over {campaign.spread_seconds / 3600:g} h")
    if campaign.spread_until is not None:
        parts.append(f"spread until {campaign.spread_until.astimezone(UTC):%Y-%m-%d %H:%M} UTC")
    if campaign.rate_per_second is not None:
        amount, unit = rate_amount(campaign.rate_per_second)
        parts.append(f"at most {_grouped(amount)} messages/{'h' if unit == 'hour' else 's'}")
    if campaign.sending_hours_start is not None and campaign.sending_hours_end is not None:
        hours = f"{campaign.sending_hours_start:%H:%M}–{campaign.sending_hours_end:%H:%M}"
        parts.append(f"sending hours {hours} in each recipient's local time")
    return " · ".join(parts)


def rate_unit(per_second: float) -> str:
    """The unit a rate reads in as the marketer most likely gave it: "hour" or "second".

    Per hour below 1 a second, and per hour too when a whole number an hour is no short number a
    second: 7,000 an hour stays "7,000 messages an hour", not "1.94444 a second" (which, typed back,
    is 6,999.98 an hour: another rate and another content hash). Otherwise per second (50, 1.5).
    """
    if per_second < 1:
        return "hour"
    short = math.isclose(per_second, round(per_second, 3), rel_tol=1e-12, abs_tol=0)
    # To the hundredth an hour: the pre-flight keeps a rate to 6 decimals a second (7,000 an hour is 1.944444).
    return "hour" if not short and _whole(round(per_second * 3600, 2)) else "second"


def rate_amount(per_second: float) -> tuple[str, str]:
    """The rate as an exact plain number in its ``rate_unit``: ``("7000", "hour")``, ``("50", "second")``.

    No exponent and no digit dropped, so the composer can show it in its input and a form saved
    unchanged keeps the rate (``:g`` made 1,234,567 an hour "1.23457e+06").
    """
    unit = rate_unit(per_second)
    value = round(per_second * 3600, 6) if unit == "hour" else per_second
    return _plain(value), unit


def rate_words(per_second: float) -> str:
    """A rate as a marketer reads it: ``50`` → "50 messages a second"; per hour as ``rate_unit`` says.

    ``500 / 3600`` → "500 messages an hour", not "0.138889 a second" (120 over 2 hours: "60 messages an hour");
    ``7000 / 3600`` → "7,000 messages an hour", not "1.94 messages a second".
    """
    per_hour = rate_unit(per_second) == "hour"
    amount = _amount(per_second * 3600 if per_hour else per_second)
    return f"{amount} {'message' if amount == '1' else 'messages'} {'an hour' if per_hour else 'a second'}"


def _whole(value: float) -> bool:
    return math.isclose(value, round(value), rel_tol=1e-9, abs_tol=1e-9)


def _plain(value: float) -> str:
    """``7000.0`` → "7000", ``0.5`` → "0.5", ``1234567.0`` → "1234567": the shortest exact decimal, no exponent."""
    if _whole(value):
        return str(round(value))
    text = repr(value)
    return text if "e" not in text else f"{value:.20f}".rstrip("0").rstrip(".")


def _grouped(plain: str) -> str:
    """``"1800"`` → "1,800", ``"514.285714"`` → "514.285714": a ``_plain`` number with its thousands grouped."""
    whole, point, fraction = plain.partition(".")
    return f"{int(whole):,}{point}{fraction}"


def _amount(value: float) -> str:
    """``1800`` → "1,800", ``16.667`` → "16.7", ``1.5`` → "1.5": three significant digits, whole from 100."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


# --- spread --------------------------------------------------------------------------------------


def spread_window(campaign: Campaign, start: datetime) -> float | None:
    """Seconds over which ``campaign`` spreads each wave, from ``start``; None when it is not spread.

    ``spread_until`` counts from ``start``: a campaign started after it sends at once (0).
    """
    if campaign.spread_seconds is not None:
        return float(campaign.spread_seconds)
    if campaign.spread_until is not None:
        return max(0.0, (campaign.spread_until - start).total_seconds())
    return None


def spread_offset(recipient_id: int, window: float) -> float:
    """Seconds after its wave at which recipient ``recipient_id`` goes, in [0, ``window``) (``spread_sql``'s figure)."""
    return (recipient_id * GOLDEN) % 1 * window


def spread_sql(base: str, id_column: str) -> str:
    """SQL of the instant ``base`` + ``spread_offset(id_column, window)``; one ``%s`` param, the window in seconds."""
    if connection.vendor == "postgresql":
        fraction = f"(CAST({id_column} AS DOUBLE PRECISION) * {GOLDEN!r})"
        return f"({base} + (({fraction} - floor({fraction})) * %s) * INTERVAL '1 second')"
    # SQLite keeps instants as text "YYYY-MM-DD HH:MM:SS.ffffff" (UTC): strftime keeps it comparable as text.
    fraction = f"({id_column} * {GOLDEN!r})"
    offset = f"(({fraction} - CAST({fraction} AS INTEGER)) * %s)"
    return f"strftime('%%Y-%%m-%%d %%H:%%M:%%f', {base}, printf('%%+.3f seconds', {offset}))"


def expected_pace(
    campaign: Campaign, waves: list[dict], budget: float | None, zones: Mapping[str, int] | None = None
) -> tuple[float | None, str | None]:
    """The pre-flight's ``rate_per_second`` and ``expected_end`` (ISO 8601 Z) for ``waves`` (pre-flight wave dicts).

    Each wave goes at its spread's pace (size / window), else at the campaign's rate, both capped
    at the rate it may be fed (its own, else ``budget``); the rate is the fastest wave's, the end
    the last wave's. None for either when no rate bounds it (no spread, no rate, no budget).
    With sending hours, ``zones`` (recipients per IANA zone) splits each wave by zone: a zone
    outside the hours at its wave starts when they open there (``hours_open``), and the parts are
    fed one after the other at the rate, so the end is when the last zone's part is through
    (a window that closes before its part is through is not counted). Quiet hours are not counted.
    An end past year 9999 (a send_at at its last hours: nothing bounds it) is None: no datetime holds it.
    """
    cap = min((r for r in (campaign.rate_per_second, budget) if r is not None), default=None)
    rates, ends, beyond = [], [], False
    for wave in waves:
        if not wave["size"]:
            continue
        at = datetime.fromisoformat(wave["at"].replace("Z", "+00:00"))
        window = spread_window(campaign, at)
        rate = wave["size"] / window if window else cap
        if rate is not None and cap is not None:
            rate = min(rate, cap)
        if rate is None:
            return None, None
        rates.append(rate)
        try:
            ends.append(_wave_end(campaign, wave, at, rate, zones))
        except OverflowError:  # was a 500 of the pre-flight, the composer's and submit's
            beyond = True
    if not rates:
        return None, None
    if beyond:
        return round(max(rates), 6), None
    return round(max(rates), 6), max(ends).astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _wave_end(campaign: Campaign, wave: dict, at: datetime, rate: float, zones: Mapping[str, int] | None) -> datetime:
    """When ``wave`` (starting ``at``, fed at ``rate``/s) is through, its zones waiting for the sending hours."""
    start, end = campaign.sending_hours_start, campaign.sending_hours_end
    if start is None or end is None or not zones:
        return at + timedelta(seconds=wave["size"] / rate)
    parts = sorted(
        (hours_open(at, zone, start, end) or at, zones[zone]) for zone in wave["zones"] if zones.get(zone)
    )  # fmt: skip
    through = at
    for opens, size in parts:
        through = max(through, opens) + timedelta(seconds=size / rate)
    return through


# --- sending hours -------------------------------------------------------------------------------


def hours_open(due: datetime, zone: str, start: time | None, end: time | None) -> datetime | None:
    """When a row due at ``due`` may go inside the daily window [start, end) of ``zone``; None when ``due`` is inside.

    The next instant the recipient's clock shows ``start`` (``quiet_hours.next_wall_time``:
    on a spring-forward day a start that does not exist is the transition instant). UTC out.
    """
    if start is None or end is None:
        return None
    local = ZoneInfo(zone)
    if in_window(due.astimezone(local).time().replace(tzinfo=None), start, end):
        return None
    return next_wall_time(due, local, start)


# --- rate and fair share -------------------------------------------------------------------------


def effective_rate(campaign: Campaign) -> float | None:
    """Messages/second ``campaign`` may be fed: its rate, capped at its channel's budget; None: no rate of its own."""
    if campaign.rate_per_second is None:
        return None
    budget = standard_budget(campaign.channel)
    return campaign.rate_per_second if budget is None else min(campaign.rate_per_second, budget)


def allowance(rate: float, paced_from: datetime | None, paced_count: int, now: datetime) -> tuple[int, datetime, int]:
    """Rows a campaign paced at ``rate``/s may be fed at ``now``, and its clock to store when they are fed.

    Returns (rows, paced_from, paced_count before adding them): credit is
    ``rate × (now − paced_from) − paced_count``. A new clock, or credit over ``BURST_SECONDS`` of
    the rate (an idle spell: a pause, a wave tomorrow), restarts the clock ``RESTART_SECONDS``
    of the rate ago (at least one row's time), so an idle spell is not made up by a burst.
    """
    if paced_from is not None:
        credit = rate * (now - paced_from).total_seconds() - paced_count
        if credit <= max(1.0, rate * BURST_SECONDS):
            return max(0, int(credit)), paced_from, paced_count
    first = max(1.0, rate * RESTART_SECONDS)
    return int(first), now - timedelta(seconds=first / rate), 0


def fair_split(wants: Mapping[int, int], room: int) -> dict[int, int]:
    """Split ``room`` rows between campaigns wanting ``wants[id]`` each, max-min fair (water-filling).

    Each round gives every campaign still wanting an equal share of what is left, or what it
    wants if less; the units an even split cannot give go to the lowest ids.
    """
    given = {campaign: 0 for campaign in wants}
    wanting = sorted(campaign for campaign, want in wants.items() if want > 0)
    while room > 0 and wanting:
        share = room // len(wanting)
        if share == 0:
            for campaign in wanting[:room]:
                given[campaign] += 1
            break
        for campaign in wanting:
            take = min(share, wants[campaign] - given[campaign])
            given[campaign] += take
            room -= take
        wanting = [campaign for campaign in wanting if given[campaign] < wants[campaign]]
    return given


# --- resume --------------------------------------------------------------------------------------


def on_resume(campaign: Campaign, paused_seconds: float) -> int:
    """Shift the spread rows not yet due of ``campaign`` by the pause, so they do not all burst at resume; how many.

    Set-based: one UPDATE of its ``scheduled`` rows with reason ``campaign-spread``. The rate
    clock restarts now (``paced_from``), so the pause is not made up by a burst either.
    Call it from ``actions.resume`` in the resume's transaction.
    """
    Campaign.objects.filter(pk=campaign.pk).update(paced_from=timezone.now(), paced_count=0)
    rows = Notification.objects.filter(campaign=campaign, state=State.SCHEDULED, reason=SPREAD)
    return rows.update(send_at=F("send_at") + timedelta(seconds=max(0.0, float(paused_seconds))))
