"""campaigns.csv_upload: an uploaded CSV of user ids read, refused or reported, ids checked in chunks."""

import io

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from backend.notifications.actions import upsert_recipient
from campaigns import csv_upload
from campaigns.csv_upload import UploadRefused, parse_upload

pytestmark = pytest.mark.django_db

KNOWN = ["u-1", "u-2", "مستخدم-١"]


@pytest.fixture
def recipients(db):
    for user_id in KNOWN:
        upsert_recipient(user_id, {"language": "ar"})


def parse(data: bytes, **kwargs):
    return parse_upload(io.BytesIO(data), **kwargs)


def summary(report):
    return (
        report.rows_read,
        report.blank_lines,
        report.duplicates,
        report.known_ids,
        report.unknown_ids,
        report.header,
    )


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"u-1\nu-2\n", (2, 0, 0, ["u-1", "u-2"], [], False)),
        (b"\xef\xbb\xbfu-1\nu-2", (2, 0, 0, ["u-1", "u-2"], [], False)),  # BOM, no final line end
        (b"u-1\r\nu-2\r\n", (2, 0, 0, ["u-1", "u-2"], [], False)),  # CRLF
        (b'"u-1"\n"u-2"\n', (2, 0, 0, ["u-1", "u-2"], [], False)),  # quoted
        (b'"u,1"\nu-2\n', (2, 0, 0, ["u-2"], ["u,1"], False)),  # a quoted comma stays in the id
        (b"u-1\n\n  \nu-1\nghost\nu-2\nghost\n", (5, 2, 2, ["u-1", "u-2"], ["ghost"], False)),
        (b" u-1 \n", (1, 0, 0, ["u-1"], [], False)),  # spaces around an id dropped
        ("مستخدم-١\nمستخدم-٢\n".encode(), (2, 0, 0, ["مستخدم-١"], ["مستخدم-٢"], False)),  # Arabic ids
        (b"user_id\nu-1\n", (1, 0, 0, ["u-1"], [], True)),
        (b"\xef\xbb\xbfuser_id\r\nu-1\r\n", (1, 0, 0, ["u-1"], [], True)),
        (b"email,User ID,plan\r\na@x.com,u-2,gold\r\nb@x.com,,gold\r\nc@x.com,u-9,silver\r\n",
         (2, 1, 0, ["u-2"], ["u-9"], True)),
        (b'"name","user-id"\n"Layla ""L""",u-1\n', (1, 0, 0, ["u-1"], [], True)),
        (b"USER_ID;plan\nu-1;gold\nu-2;gold\n", (2, 0, 0, ["u-1", "u-2"], [], True)),  # Excel's ; separator
        (b"plan\tuser_id\ngold\tu-2\n", (1, 0, 0, ["u-2"], [], True)),  # tab-separated
        (b"\n\nuser_id\nu-1\n", (1, 2, 0, ["u-1"], [], True)),  # blank lines before the header
        (b"u-1\x00\n", (1, 0, 0, [], ["u-1\x00"], False)),  # no recipient can have a NUL in its id
    ],
)  # fmt: skip
def test_it_reports_what_the_file_holds(recipients, data, expected):
    assert summary(parse(data)) == expected


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "The file holds no user ids: put one id on each line, or a user_id column."),
        (b"\n\n", "The file holds no user ids: put one id on each line, or a user_id column."),
        (b"user_id\n", "The file holds no user ids: put one id on each line, or a user_id column."),
        ("u-1\nJosé\n".encode("latin-1"),
         "The file is not UTF-8 (line 2, byte 7): save it as UTF-8 (CSV UTF-8 in Excel)."),
        (b"\xef\xbb\xbf" + "é".encode("latin-1"),
         "The file is not UTF-8 (line 1, byte 3): save it as UTF-8 (CSV UTF-8 in Excel)."),
        ("u-1\n".encode("utf-16"), "The file is not UTF-8 (line 1, byte 0): save it as UTF-8 (CSV UTF-8 in Excel)."),
        (b"u-1\n" + b"x" * 1025 + b"\n", "Line 2 is over 1 KiB: put one user id on each line."),
        (b"x" * 5 * 1024 * 1024, "Line 1 is over 1 KiB: put one user id on each line."),
        (b"email,plan\na@x.com,gold\n",
         "The first row has several columns (email, plan) and none is named user_id: "
         "name the column of ids user_id, or upload one id per line."),
        (b'u-1\n"u-2\nu-3\n',
         'An id running over several lines ends at line 3: is a quote (") left open?'),
    ],
)  # fmt: skip
def test_it_refuses_files_it_cannot_use(recipients, data, message):
    with pytest.raises(UploadRefused) as refused:
        parse(data)
    assert str(refused.value) == message


def test_an_id_of_exactly_1_kib_is_a_line_it_reads(recipients):
    report = parse(b"\xef\xbb\xbf" + b"x" * 1024 + b"\r\nu-1\r\n")
    assert (report.rows_read, report.known_ids) == (2, ["u-1"])


class Repeating(io.RawIOBase):
    """A read-only stream of ``line`` ``times`` over, made as it is read (nothing held but one buffer)."""

    def __init__(self, line: bytes, times: int):
        self.line, self.left = line, times

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = min(self.left, len(buffer) // len(self.line))
        self.left -= count
        buffer[: count * len(self.line)] = self.line * count
        return count * len(self.line)


def test_2_000_001_rows_are_refused(db):
    with pytest.raises(UploadRefused) as refused:
        parse_upload(io.BufferedReader(Repeating(b"u\n", 2_000_001)))
    assert str(refused.value) == "The file has over 2,000,000 rows of ids: split it into smaller files."


def test_2_000_000_rows_are_read(db):
    report = parse_upload(io.BufferedReader(Repeating(b"u\n", 2_000_000)))
    assert (report.rows_read, report.duplicates, report.unknown_ids) == (2_000_000, 1_999_999, ["u"])


def test_a_file_over_20_mb_is_refused_by_its_size_before_reading(db):
    stream = io.BytesIO(b"u-1\n")
    with pytest.raises(UploadRefused) as refused:
        parse_upload(stream, size=20 * 1024 * 1024 + 1)
    assert str(refused.value) == "The file is over 20 MB: split it into smaller files."
    assert stream.tell() == 0


def test_a_file_over_20_mb_is_refused_while_reading_when_its_size_is_unknown(db):
    line = b"x" * 1023 + b"\n"  # 1 KiB a line: 20,481 lines pass 20 MB (and 2,000,000 rows are never reached)
    with pytest.raises(UploadRefused) as refused:
        parse_upload(io.BufferedReader(Repeating(line, 20 * 1024 + 1)))
    assert str(refused.value) == "The file is over 20 MB: split it into smaller files."


def test_ids_are_checked_in_one_query_per_chunk(recipients, monkeypatch):
    monkeypatch.setattr(csv_upload, "CHUNK", 2)
    with CaptureQueriesContext(connection) as queries:
        report = parse(b"u-1\nu-2\nu-3\nu-1\nu-4\n")
    assert (report.known_ids, report.unknown_ids, report.duplicates) == (["u-1", "u-2"], ["u-3", "u-4"], 1)
    assert len(queries) == 2  # 4 distinct ids, 2 a query
