"""Local-time waves: "at 09:00 in each recipient's local time" as one send instant per time zone.

A campaign scheduled at a wall time reaches each recipient when their own clock shows it:
the first such instant at or after the campaign starts (a recipient whose 09:00 has already
passed today gets tomorrow's). Zones whose clocks show the wall time at the same instant
(Asia/Riyadh and Europe/Moscow, or two zones both at UTC+03:30) are one wave.

The instants come from ``quiet_hours.next_wall_time`` (zoneinfo, IANA database), so they are
exact across DST: on a fall-back day a wall time that occurs twice is sent at its first
occurrence; on a spring-forward day a wall time that does not exist (02:30 in New York on the
second Sunday of March) is sent when the clocks jump past it (03:00 local). Half-hour and
quarter-hour offsets (Asia/Tehran +03:30, Asia/Kolkata +05:30, Asia/Kathmandu +05:45) are their
own waves.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from backend.notifications.quiet_hours import next_wall_time


@dataclass(frozen=True)
class Wave:
    """One send instant of a local-time campaign.

    ``at``: the UTC instant; ``utc_offset``: the offset the wave's zones show at that instant
    (e.g. +03:30 for Asia/Tehran); ``zones``: the IANA names it covers, sorted; ``size``:
    recipients in those zones (0 when only instants were asked for).
    """

    at: datetime
    utc_offset: timedelta
    zones: tuple[str, ...]
    size: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, as the pre-flight and a ``schedule`` audit row keep a wave.

        ``{"at": "2026-12-01T05:30:00Z", "utc_offset": "UTC+03:30", "zones": ["Asia/Tehran"], "size": 30}``.
        """
        return {"at": iso_z(self.at), "utc_offset": self.offset_label(), "zones": list(self.zones), "size": self.size}

    def offset_label(self) -> str:
        """The offset as ``UTC+03:30`` / ``UTC−05:00`` / ``UTC+00:00``."""
        minutes = int(self.utc_offset.total_seconds() // 60)
        sign = "+" if minutes >= 0 else "−"
        return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def iso_z(instant: datetime) -> str:
    """``instant`` (aware) as ISO 8601 in UTC with a Z, to the second: ``2026-12-01T09:00:00Z``."""
    return instant.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _zone(name: str) -> ZoneInfo:
    """The zone named ``name``; UTC when the name is unknown to the IANA database (as policy treats it)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def wave_instant(wall: time, start: datetime, zone_name: str) -> datetime:
    """The first instant at or after ``start`` (aware) when clocks in ``zone_name`` show ``wall``; UTC-aware.

    ``start`` itself counts: a campaign started exactly at 09:00 local sends that wave at once.
    """
    return next_wall_time(start - timedelta(microseconds=1), _zone(zone_name), wall)


def waves(wall: time, start: datetime, zone_counts: Mapping[str, int] | Iterable[str]) -> list[Wave]:
    """The waves of a campaign at wall time ``wall`` starting at ``start``, earliest first.

    ``zone_counts``: recipients per IANA zone name (a mapping), or just the zone names. Zones
    that reach ``wall`` at the same instant share a wave and their counts add up.
    """
    counts = zone_counts if isinstance(zone_counts, Mapping) else dict.fromkeys(zone_counts, 0)
    grouped: dict[datetime, tuple[list[str], int]] = {}
    for name, size in counts.items():
        at = wave_instant(wall, start, name)
        zones, total = grouped.get(at, ([], 0))
        grouped[at] = ([*zones, name], total + size)
    result = []
    for at, (zones, size) in sorted(grouped.items()):
        offset = at.astimezone(_zone(zones[0])).utcoffset() or timedelta(0)
        result.append(Wave(at=at.astimezone(UTC), utc_offset=offset, zones=tuple(sorted(zones)), size=size))
    return result
