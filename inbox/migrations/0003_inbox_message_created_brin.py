"""A BRIN index on in-app messages' ``created_at``: the admin's list reads its window, not every message.

In-app messages stay in people's inboxes (retention detaches them from their notification, never
deletes them), so the table only grows; the admin lists the last day of them by default
(``CreatedWithin``) and counted the whole table at each page. BRIN as notifications migration 0028:
a few kilobytes, nearly free for inserts, built ``CONCURRENTLY``. PostgreSQL only.
"""

from django.db import migrations

NAME, TABLE, COLUMN = "inbox_message_created_brin", "inbox_inboxmessage", "created_at"


def _create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{NAME}" ON "{TABLE}" USING brin ("{COLUMN}")'
        " WITH (autosummarize = on)"
    )


def _drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{NAME}"')


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("inbox", "0002_drop_off_site_links")]

    operations = [migrations.RunPython(_create, _drop)]
