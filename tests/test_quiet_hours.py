"""Quiet-hours end instants, worked out by hand from the IANA rules (values not computed by the code).

2026 transitions: America/New_York springs forward Sun 8 Mar 02:00 EST → 03:00 EDT (07:00 UTC) and falls
back Sun 1 Nov 02:00 EDT → 01:00 EST (06:00 UTC); Europe/Berlin springs forward Sun 29 Mar 02:00 CET →
03:00 CEST (01:00 UTC) and falls back Sun 25 Oct 03:00 CEST → 02:00 CET (01:00 UTC). Asia/Riyadh is
UTC+3, Asia/Kolkata UTC+5:30, Asia/Tehran UTC+3:30 (no DST since 2022), all year.
"""

from datetime import UTC, datetime, time

import pytest

from backend.notifications.quiet_hours import parse_wall_time, quiet_hours_end


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


CASES = [
    # zone, window start, end, now (UTC), expected end (UTC) or None — the local reading in the comment
    ("Asia/Riyadh", time(22), time(7), utc(2026, 6, 10, 21, 0), utc(2026, 6, 11, 4, 0)),  # 00:00 → 07:00 next
    ("Asia/Riyadh", time(22), time(7), utc(2026, 6, 10, 18, 59), None),  # 21:59: not yet
    ("Asia/Riyadh", time(22), time(7), utc(2026, 6, 10, 19, 0), utc(2026, 6, 11, 4, 0)),  # 22:00: start counts
    ("Asia/Riyadh", time(22), time(7), utc(2026, 6, 11, 4, 0), None),  # 07:00: end does not
    ("Asia/Riyadh", time(13), time(15), utc(2026, 6, 10, 10, 30), utc(2026, 6, 10, 12, 0)),  # same-day window
    # New York, spring forward: 23:00 EST Sat → 07:00 EDT Sun is 11:00 UTC (a fixed −5 would say 12:00).
    ("America/New_York", time(22), time(7), utc(2026, 3, 8, 4, 0), utc(2026, 3, 8, 11, 0)),
    # …and a window ending at 02:30, which does not exist that night: it ends at the jump, 03:00 EDT.
    ("America/New_York", time(22), time(2, 30), utc(2026, 3, 8, 5, 30), utc(2026, 3, 8, 7, 0)),
    # New York, fall back: 23:00 EDT Sat → 07:00 EST Sun is 12:00 UTC.
    ("America/New_York", time(22), time(7), utc(2026, 11, 1, 3, 0), utc(2026, 11, 1, 12, 0)),
    # 01:30 happens twice: at 00:30 EDT the first (01:30 EDT = 05:30 UTC) comes next…
    ("America/New_York", time(22), time(1, 30), utc(2026, 11, 1, 4, 30), utc(2026, 11, 1, 5, 30)),
    # …at 01:10 EST (the second pass) the second one (01:30 EST = 06:30 UTC).
    ("America/New_York", time(22), time(1, 30), utc(2026, 11, 1, 6, 10), utc(2026, 11, 1, 6, 30)),
    # Berlin, spring forward: 00:00 CET → 06:00 CEST is 04:00 UTC; a 02:30 end ends at the jump, 01:00 UTC.
    ("Europe/Berlin", time(23), time(6), utc(2026, 3, 28, 23, 0), utc(2026, 3, 29, 4, 0)),
    ("Europe/Berlin", time(22), time(2, 30), utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 1, 0)),
    # Berlin, fall back: 00:30 CEST → 06:00 CET is 05:00 UTC; 02:30 twice, the first is 02:30 CEST = 00:30 UTC.
    ("Europe/Berlin", time(23), time(6), utc(2026, 10, 24, 22, 30), utc(2026, 10, 25, 5, 0)),
    ("Europe/Berlin", time(22), time(2, 30), utc(2026, 10, 24, 23, 0), utc(2026, 10, 25, 0, 30)),
    # Kolkata, half-hour offset: 22:30 IST → 07:00 IST is 01:30 UTC; 21:30 → 06:30 IST is 01:00 UTC.
    ("Asia/Kolkata", time(22), time(7), utc(2026, 1, 15, 17, 0), utc(2026, 1, 16, 1, 30)),
    ("Asia/Kolkata", time(21, 30), time(6, 30), utc(2026, 1, 15, 16, 0), utc(2026, 1, 16, 1, 0)),
    # Tehran, +3:30 all year: 23:30 → 08:00 is 04:30 UTC; on the old DST date (21 Mar) nothing moves.
    ("Asia/Tehran", time(23), time(8), utc(2026, 6, 10, 20, 0), utc(2026, 6, 11, 4, 30)),
    ("Asia/Tehran", time(23), time(8), utc(2026, 3, 21, 0, 0), utc(2026, 3, 21, 4, 30)),
    # No window, or an empty one.
    ("Asia/Tehran", None, None, utc(2026, 3, 21, 0, 0), None),
    ("Asia/Tehran", time(8), time(8), utc(2026, 3, 21, 4, 30), None),
]


@pytest.mark.parametrize(("zone", "start", "end", "now", "expected"), CASES)
def test_quiet_hours_end_instant(zone, start, end, now, expected):
    assert quiet_hours_end(now, zone, start, end) == expected


@pytest.mark.parametrize(
    ("typed", "wall"),
    [
        ("22:30", time(22, 30)),
        ("۲۲:۳۰", time(22, 30)),  # Persian digits U+06F0–U+06F9
        ("٠٧:٠٥", time(7, 5)),  # Arabic-Indic digits U+0660–U+0669
        ("7:05", time(7, 5)),
        (" 00:00 ", time(0, 0)),
        ("23:59", time(23, 59)),
    ],
)
def test_a_wall_time_is_read_in_any_scripts_digits(typed, wall):
    assert parse_wall_time(typed) == wall


@pytest.mark.parametrize("typed", ["24:00", "۲۴:۰۰", "12:60", "22:3", "2230", "22:30:00", "10pm", "", "22.30"])
def test_a_wall_time_that_is_none_is_refused(typed):
    with pytest.raises(ValueError):
        parse_wall_time(typed)
