"""BRIN indexes for the dashboard's time windows: notifications' ``sent_at``, attempts' ``started_at``, state changes' ``at``.

The dashboard (backend/notifications/aggregates.py) reads the last hour, day or week of these
rows; without an index each refresh read the whole tables (3.6 s for the hour over a week of
1,000,000 notifications, README "Metrics"). A BRIN index keeps only the lowest and highest value of
each range of 128 table pages: these columns grow with the order rows are written, so it finds a
window's pages at a few kilobytes of index, and an insert costs it nearly nothing: a range is
summarized once full (``autosummarize``, by autovacuum), and the newest, unsummarized pages are
always read — the newest rows, which every window wants. A B-tree on these columns would cost each of a campaign's million inserts
(README "Benchmarks"). PostgreSQL only: SQLite has no BRIN, and the embedded demo's tables are small.
"""

from django.db import migrations

INDEXES = {
    "notification_sent_brin": ("notifications_notification", "sent_at"),
    "attempt_started_brin": ("notifications_attempt", "started_at"),
    "statechange_at_brin": ("notifications_statechange", "at"),
}


def _create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name, (table, column) in INDEXES.items():
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" USING brin ("{column}") WITH (autosummarize = on)')


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for name in INDEXES:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [("notifications", "0020_support_search_indexes")]

    operations = [migrations.RunPython(_create, _drop)]
