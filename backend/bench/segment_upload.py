"""Time to read and check an uploaded CSV of 1,000,000 user ids (campaigns.csv_upload).

Run with ``bin/bench segment_upload`` (a throwaway PostgreSQL), or from the
repository root against a migrated database::

    python -m backend.bench.segment_upload [--ids 1000000] [--known 500000]

It adds ``--known`` recipients (``bench-1`` …) inside a transaction that is
rolled back at the end, writes a CSV with a header and ``--ids`` ids
(``bench-1`` … ``bench-N``, so the rest are unknown, plus 1% repeated) to a
temporary file, and times ``parse_upload`` on it, split into reading the file
and checking the ids against the recipients. The peak resident memory of the
process is printed too.
"""

import argparse
import os
import resource
import tempfile
import time


def write_csv(path: str, ids: int) -> int:
    """Write the upload: a header, ids 1..``ids`` and every hundredth again; the byte size."""
    with open(path, "w", encoding="utf-8", newline="") as out:
        out.write("\ufeffuser_id,plan\r\n")
        for number in range(1, ids + 1):
            out.write(f"bench-{number},gold\r\n")
            if number % 100 == 0:
                out.write(f"bench-{number - 50},gold\r\n")
    return os.path.getsize(path)


def add_recipients(known: int) -> None:
    """``known`` recipients ``bench-1`` … in one statement (PostgreSQL) or in batches (elsewhere)."""
    from django.db import connection

    from backend.notifications.models import Recipient

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO notifications_recipient (user_id, email, phone, language, time_zone, email_bounce,"
                " phone_disabled_reason, attributes, created_at, updated_at)"
                " SELECT 'bench-' || g, '', '', 'en', 'UTC', '', '', '{}'::jsonb, now(), now()"
                " FROM generate_series(1, %s) g",
                [known],
            )
            cursor.execute("ANALYZE notifications_recipient")  # as autovacuum would have, long before an upload
        return
    Recipient.objects.bulk_create((Recipient(user_id=f"bench-{n}") for n in range(1, known + 1)), batch_size=5000)


def run(ids: int, known: int) -> None:
    """Print the timings of one upload of ``ids`` ids of which ``known`` have a recipient."""
    from django.db import connection, transaction

    from campaigns import csv_upload

    print(f"$ python -m backend.bench.segment_upload --ids {ids} --known {known}   (database: {connection.vendor})")
    with tempfile.TemporaryDirectory() as folder, transaction.atomic():
        path = os.path.join(folder, "ids.csv")
        size = write_csv(path, ids)
        add_recipients(known)
        with open(path, "rb") as upload:
            started = time.perf_counter()
            distinct, rows, blanks, header = csv_upload._read_ids(upload)
            read_s = time.perf_counter() - started
            started = time.perf_counter()
            found = csv_upload._known(distinct)
            check_s = time.perf_counter() - started
        with open(path, "rb") as upload:
            started = time.perf_counter()
            report = csv_upload.parse_upload(upload, size=size)
            total_s = time.perf_counter() - started
        transaction.set_rollback(True)
    assert (len(found), rows, header) == (
        known,
        len(report.known_ids) + len(report.unknown_ids) + report.duplicates,
        True,
    )
    print(f"file: {size / 1024 / 1024:.1f} MB, {rows:,} id rows, {len(distinct):,} distinct, {blanks} blank")
    print(
        f"report: {len(report.known_ids):,} known, {len(report.unknown_ids):,} unknown, {report.duplicates:,} repeats"
    )
    print(f"read and parse: {read_s:.2f} s; check against recipients ({csv_upload.CHUNK:,} a query): {check_s:.2f} s")
    print(f"parse_upload end to end: {total_s:.2f} s")
    print(f"peak resident memory of the process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=1_000_000, help="distinct ids in the file (default 1,000,000)")
    parser.add_argument("--known", type=int, default=500_000, help="of which have a recipient (default 500,000)")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    import django

    django.setup()
    run(args.ids, args.known)


if __name__ == "__main__":
    main()
