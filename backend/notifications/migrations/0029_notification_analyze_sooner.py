"""Statistics of the notification table refreshed after 1 % of it changes (plus 10,000 rows), not 10 %.

PostgreSQL's autovacuum re-analyzes a table once ``threshold + scale_factor × rows`` of it changed
(defaults 50 + 10 %). On a table of 10,000,000 notifications that is a million changes: a first
large campaign, or a new API client's first day, ran for days on statistics that said such rows
barely existed, and the planner read every campaign row, or every row of a client, for each batch
of sends (README "Send many at once"; those reads no longer depend on it). An analysis samples
about 30,000 rows whatever the table's size, and autovacuum starts at most one a table per
``autovacuum_naptime`` (1 min), so doing it sooner costs little. PostgreSQL only.
"""

from django.db import migrations

TABLE = "notifications_notification"
OPTIONS = {"autovacuum_analyze_scale_factor": "0.01", "autovacuum_analyze_threshold": "10000"}


def _set(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    settings = ", ".join(f"{name} = {value}" for name, value in OPTIONS.items())
    schema_editor.execute(f'ALTER TABLE "{TABLE}" SET ({settings})')


def _reset(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f'ALTER TABLE "{TABLE}" RESET ({", ".join(OPTIONS)})')


class Migration(migrations.Migration):
    dependencies = [("notifications", "0028_notification_created_brin")]

    operations = [migrations.RunPython(_set, _reset)]
