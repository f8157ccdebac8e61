"""Local-time waves (campaigns/waves.py): instants worked out by hand from each zone's offset on the day."""

from datetime import UTC, datetime, time, timedelta

import pytest

from campaigns.waves import Wave, wave_instant, waves


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "wall", "start", "expected"),
    [
        # 09:00 on 1 December 2026, the campaign starting at 05:00Z.
        ("Asia/Riyadh", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 1, 6)),  # +03:00
        ("Europe/Moscow", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 1, 6)),  # +03:00, same instant
        ("Asia/Tehran", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 1, 5, 30)),  # +03:30, no DST since 2022
        ("Asia/Kolkata", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 2, 3, 30)),  # +05:30: 03:30Z passed → tomorrow
        ("Asia/Kathmandu", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 2, 3, 15)),  # +05:45: passed → tomorrow
        ("America/New_York", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 1, 14)),  # −05:00 (EST)
        ("UTC", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 1, 9)),
        ("Not/AZone", time(9), utc(2026, 12, 1, 5), utc(2026, 12, 1, 9)),  # unknown names are UTC, as in policy
        # Started exactly when Riyadh shows 09:00: that wave goes at once, not tomorrow.
        ("Asia/Riyadh", time(9), utc(2026, 12, 1, 6), utc(2026, 12, 1, 6)),
        # US spring forward on Sunday 8 March 2026: 09:00 EDT is 13:00Z (a fixed −05:00 would say 14:00Z).
        ("America/New_York", time(9), utc(2026, 3, 8, 4), utc(2026, 3, 8, 13)),
        # …and 02:30 does not exist that night: sent when the clocks jump to 03:00 EDT (07:00Z).
        ("America/New_York", time(2, 30), utc(2026, 3, 8), utc(2026, 3, 8, 7)),
        # US fall back on Sunday 1 November 2026: 01:30 happens twice; the first (EDT, 05:30Z) is taken.
        ("America/New_York", time(1, 30), utc(2026, 11, 1), utc(2026, 11, 1, 5, 30)),
        # EU spring forward on 29 March 2026: London's 01:30 does not exist; 02:00 BST is 01:00Z.
        ("Europe/London", time(1, 30), utc(2026, 3, 29), utc(2026, 3, 29, 1)),
    ],
)
def test_each_zone_gets_the_first_instant_its_clocks_show_the_wall_time(zone, wall, start, expected):
    assert wave_instant(wall, start, zone) == expected


def test_zones_at_the_same_instant_share_a_wave_and_add_up_their_recipients():
    got = waves(
        time(9),
        utc(2026, 3, 8, 4),  # the US DST change falls on the campaign's date
        {"Asia/Riyadh": 40, "Europe/Moscow": 2, "Asia/Tehran": 30, "Asia/Kolkata": 5, "America/New_York": 7},
    )
    assert got == [
        Wave(utc(2026, 3, 8, 5, 30), timedelta(hours=3, minutes=30), ("Asia/Tehran",), 30),
        Wave(utc(2026, 3, 8, 6), timedelta(hours=3), ("Asia/Riyadh", "Europe/Moscow"), 42),
        Wave(utc(2026, 3, 8, 13), timedelta(hours=-4), ("America/New_York",), 7),
        Wave(utc(2026, 3, 9, 3, 30), timedelta(hours=5, minutes=30), ("Asia/Kolkata",), 5),
    ]
    assert [wave.offset_label() for wave in got] == ["UTC+03:30", "UTC+03:00", "UTC−04:00", "UTC+05:30"]


def test_zone_names_alone_give_the_instants_with_no_sizes():
    assert waves(time(9), utc(2026, 12, 1, 5), ["UTC", "Asia/Kathmandu"]) == [
        Wave(utc(2026, 12, 1, 9), timedelta(0), ("UTC",), 0),
        Wave(utc(2026, 12, 2, 3, 15), timedelta(hours=5, minutes=45), ("Asia/Kathmandu",), 0),
    ]
