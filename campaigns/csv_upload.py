"""An uploaded CSV of user ids → a report of what it holds, checked against the recipients set-based.

Accepted: UTF-8 with or without a byte order mark, LF or CRLF line ends,
either one id per line or a header row with a ``user_id`` column among others
(``User ID``, ``user-id`` and ``USER_ID`` name it too). The separator is a
comma, or ``;`` / tab when the first line has one of those and no comma (what
Excel writes in many locales). Ids may be quoted; spaces around an id are
dropped (no user id may start or end with one: see the users API).

Refused with ``UploadRefused`` and a message for the uploader: a file over
20 MB, over 2,000,000 id rows, a line over 1 KiB, bytes that are not UTF-8 (the
byte offset is named), a quoted id running over several lines, a header of
several columns without ``user_id``, a file with no id at all.

The file is read line by line (one line decoded at a time); only the distinct
ids are kept, once, in file order. Known and unknown ids are told apart by one
``user_id IN (…)`` query per ``CHUNK`` distinct ids.
"""

import csv
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from django.db import connection

from backend.notifications.api.serializers import MAX_USER_ID
from backend.notifications.models import Recipient

MAX_BYTES = 20 * 1024 * 1024
MAX_ROWS = 2_000_000
MAX_LINE_BYTES = 1024
CHUNK = 10_000
BOM = b"\xef\xbb\xbf"
HEADER_NAME = "user_id"


class UploadRefused(ValueError):
    """A file that cannot be used as a list of user ids; the message says why and what to do."""


@dataclass(frozen=True)
class UploadReport:
    """What an upload holds.

    ``rows_read``: rows with an id (the header not counted); ``blank_lines``:
    rows without one; ``duplicates``: rows whose id came earlier (collapsed);
    ``known_ids`` / ``unknown_ids``: the distinct ids with and without a
    recipient, each in file order; ``header``: whether the first row was one.
    ``rows_read == len(known_ids) + len(unknown_ids) + duplicates``.
    """

    rows_read: int
    blank_lines: int
    duplicates: int
    known_ids: list[str]
    unknown_ids: list[str]
    header: bool


def parse_upload(stream: BinaryIO, size: int | None = None) -> UploadReport:
    """Read an uploaded CSV of user ids (bytes, e.g. Django's ``UploadedFile``) and check the ids.

    ``size`` (bytes), when known, refuses an oversized file before reading it;
    otherwise the count while reading does. Raises ``UploadRefused``. From a
    view: ``parse_upload(request.FILES["ids"], size=request.FILES["ids"].size)``.
    """
    if size is not None and size > MAX_BYTES:
        raise UploadRefused(_too_big())
    ids, rows, blanks, header = _read_ids(stream)
    if not ids:
        raise UploadRefused("The file holds no user ids: put one id on each line, or a user_id column.")
    known = _known(ids)
    return UploadReport(
        rows_read=rows,
        blank_lines=blanks,
        duplicates=rows - len(ids),
        known_ids=[user_id for user_id in ids if user_id in known],
        unknown_ids=[user_id for user_id in ids if user_id not in known],
        header=header,
    )


def _read_ids(stream: BinaryIO) -> tuple[dict[str, None], int, int, bool]:
    """The distinct ids in file order (a dict used as an ordered set), id rows, blank rows, header seen."""
    lines = _lines(stream)
    first = next(lines, "")
    reader = csv.reader(itertools.chain([first], lines), delimiter=_delimiter(first))
    try:
        return _collect(reader)
    except csv.Error as exc:
        raise UploadRefused(f"Line {reader.line_num} is not CSV: {exc}.") from None


def _collect(reader) -> tuple[dict[str, None], int, int, bool]:
    rows_left, column, header, blanks = reader, 0, False, 0
    for row in reader:
        if any(cell.strip() for cell in row):
            column, header = _id_column(row)
            rows_left = reader if header else itertools.chain([row], reader)
            break
        blanks += 1
    ids: dict[str, None] = {}
    rows = 0
    for row in rows_left:
        user_id = row[column].strip() if column < len(row) else ""
        if not user_id:
            blanks += 1
            continue
        rows += 1
        if rows > MAX_ROWS:
            raise UploadRefused(f"The file has over {MAX_ROWS:,} rows of ids: split it into smaller files.")
        if "\n" in user_id:
            raise UploadRefused(
                f'An id running over several lines ends at line {reader.line_num}: is a quote (") left open?'
            )
        ids[user_id] = None
    return ids, rows, blanks, header


def _lines(stream: BinaryIO) -> Iterator[str]:
    """Decoded lines (ends kept), checked one at a time for size, length and UTF-8."""
    offset = 0
    for number in itertools.count(1):
        # Room for a BOM, a CRLF and one byte more, to see that a line is too long without reading all of it.
        raw = stream.readline(len(BOM) + MAX_LINE_BYTES + 3)
        if not raw:
            return
        start, offset = offset, offset + len(raw)
        if offset > MAX_BYTES:
            raise UploadRefused(_too_big())
        if number == 1 and raw.startswith(BOM):
            raw, start = raw[len(BOM) :], start + len(BOM)
        if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
            raise UploadRefused(f"Line {number} is over 1 KiB: put one user id on each line.")
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UploadRefused(
                f"The file is not UTF-8 (line {number}, byte {start + exc.start}): "
                "save it as UTF-8 (CSV UTF-8 in Excel)."
            ) from None


def _too_big() -> str:
    return f"The file is over {MAX_BYTES // (1024 * 1024)} MB: split it into smaller files."


def _delimiter(first_line: str) -> str:
    """A comma, unless the first line has none but a semicolon or a tab (Excel's separator in many locales)."""
    if "," not in first_line:
        for candidate in (";", "\t"):
            if candidate in first_line:
                return candidate
    return ","


def _id_column(row: list[str]) -> tuple[int, bool]:
    """``(index of the id column, whether row is a header)`` from the first non-blank row."""
    names = [cell.strip().lower().replace(" ", "_").replace("-", "_") for cell in row]
    if HEADER_NAME in names:
        return names.index(HEADER_NAME), True
    if len(row) > 1:
        shown = ", ".join(cell.strip() for cell in row[:10])
        raise UploadRefused(
            f"The first row has several columns ({shown}) and none is named user_id: "
            "name the column of ids user_id, or upload one id per line."
        )
    return 0, False


def _known(ids: dict[str, None]) -> set[str]:
    """Which of ``ids`` have a recipient: one query per ``CHUNK`` ids.

    Ids no recipient can have are not sent: too long (``MAX_USER_ID``), or
    holding a NUL, which PostgreSQL refuses in any text parameter.
    """
    known: set[str] = set()
    candidates = (user_id for user_id in ids if len(user_id) <= MAX_USER_ID and "\x00" not in user_id)
    while chunk := list(itertools.islice(candidates, CHUNK)):
        known.update(_existing(chunk))
    return known


def _existing(chunk: list[str]) -> list[str]:
    """The ids of ``chunk`` that have a recipient, in one query."""
    if connection.vendor != "postgresql":
        return list(Recipient.objects.filter(user_id__in=chunk).values_list("user_id", flat=True))
    # One array parameter instead of 10,000 placeholders: 10x faster to plan and bind (backend/bench/segment_upload).
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT user_id FROM {Recipient._meta.db_table} WHERE user_id = ANY(%s)", [chunk])
        return [row[0] for row in cursor.fetchall()]
