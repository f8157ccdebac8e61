"""A BRIN index on notifications' ``created_at``: the admin's change list reads its window, not the whole table.

The admin lists notifications created in the last hour, day (its default) or week
(``admin.CreatedWithin``); without an index on ``created_at`` each page read and sorted every row
of the history (0.9 s at 1,000,000 rows, README "Admin"). BRIN, as migration 0021's: a few
kilobytes, nearly free for a campaign's million inserts, which a B-tree would not be. Built
``CONCURRENTLY``, so a large table keeps taking inserts while it is built. PostgreSQL only.
"""

from django.db import migrations

NAME, TABLE, COLUMN = "notification_created_brin", "notifications_notification", "created_at"


def _create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{NAME}" ON "{TABLE}" USING brin ("{COLUMN}") WITH (autosummarize = on)'
    )


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{NAME}"')


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("notifications", "0027_metric_counters")]

    operations = [migrations.RunPython(_create, _drop)]
