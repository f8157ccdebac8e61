"""Quiet hours in the recipient's own time zone, exact across midnight and DST transitions.

A window is two local wall times, ``start`` (inclusive) and ``end``
(exclusive); ``start > end`` means it spans midnight, ``start == end`` means
no quiet hours. A notification that arrives inside the window is deferred to
the next instant at which the recipient's clock shows ``end``:

- on a fall-back day the wall time may occur twice (fold 0 and 1, PEP 495):
  the first occurrence after now is taken;
- on a spring-forward day it may not occur at all (02:30 in New York on the
  second Sunday of March): the window then ends at the transition instant,
  when clocks jump past it (03:00 local), not at 03:30 as a naive ``fold=0``
  conversion would give.

Time zones come from the IANA database through ``zoneinfo``.
"""

import re
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

_WALL_TIME = re.compile(r"\s*(\d{1,2}):(\d{2})\s*")


def parse_wall_time(text: str) -> time:
    """A local wall time typed as ``HH:MM`` (24-hour clock), in any script's decimal digits.

    ``۲۲:۳۰`` (Persian), ``٢٢:٣٠`` (Arabic-Indic) and ``22:30`` are the same time: a person in Tehran
    or Riyadh types the digits their keyboard has. Any Unicode decimal digit (category Nd) counts, as
    ``int()`` reads it. Raises ``ValueError`` for anything else, or an hour over 23 or minute over 59.
    """
    match = _WALL_TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a time as HH:MM")
    hour, minute = (int(part) for part in match.groups())
    return time(hour, minute)


def in_window(wall: time, start: time, end: time) -> bool:
    """Is the wall time ``wall`` inside [start, end), a window that may span midnight?"""
    if start == end:
        return False
    if start < end:
        return start <= wall < end
    return wall >= start or wall < end


def _first_instant_showing(day: date, wall: time, zone: ZoneInfo) -> list[datetime]:
    """UTC instants at which clocks in ``zone`` show ``wall`` on ``day``: one, two (overlap) or, in a gap, the
    transition instant that skips it."""
    naive = datetime.combine(day, wall)
    variants = sorted({naive.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1)})
    real = [t for t in variants if t.astimezone(zone).replace(tzinfo=None) == naive]
    if real:
        return real
    # A gap: find the first second whose local wall time is at or past ``wall`` (the jump), by bisection.
    lo, hi = variants[0], variants[-1]
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(zone).replace(tzinfo=None) >= naive:
            hi = mid
        else:
            lo = mid
    return [hi.replace(microsecond=0)]


def next_wall_time(now: datetime, zone: ZoneInfo, wall: time) -> datetime:
    """The first instant after ``now`` (aware) at which clocks in ``zone`` show ``wall``, in UTC."""
    local_day = now.astimezone(zone).date()
    for offset in range(3):
        for instant in _first_instant_showing(local_day + timedelta(days=offset), wall, zone):
            if instant > now:
                return instant
    raise AssertionError("unreachable: a wall time recurs within three days")


def quiet_hours_end(now: datetime, zone_name: str, start: time | None, end: time | None) -> datetime | None:
    """When a notification arriving at ``now`` may go out: None if ``now`` is outside the quiet window.

    ``now`` is an aware datetime; the result is in UTC.
    """
    if start is None or end is None:
        return None
    zone = ZoneInfo(zone_name)
    if not in_window(now.astimezone(zone).time().replace(tzinfo=None), start, end):
        return None
    return next_wall_time(now, zone, end)
