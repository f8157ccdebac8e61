"""An index of campaign rows by (recipient, created_at): a send's rate-limit read no longer grows with its traffic.

Each send (single or batch) reads the recipient's campaign notifications of the last day, which
count against its rate limits (``policy._campaign_rows``). Through ``notification_recipient_idx``
that read visited every row the recipient got in the day, API rows included, and kept the campaign
ones: about 0.4 µs a row (``bin/bench rate_limit_read``), so a batch of 1,000 recipients sent 1,000
notifications each that day took 394 ms to read 1,003,000 rows, where 3,000 were wanted.

This partial index holds campaign rows only. Its condition is ``campaign_id + 0 IS NOT NULL``, as
the reads write it: the campaign index's (``campaign_id IS NOT NULL``) is not implied by that, so
statistics that count no campaign rows cannot make the planner read every campaign row through it,
as they once did (``tests/test_rate_limit_plans.py``).

Its price is one entry for each campaign row version: the fan-out's insert and each state change.
README "Throughput: the send API" has both figures. Built ``CONCURRENTLY`` on PostgreSQL, so a
large table keeps taking inserts and state changes while it is built.
"""

from django.db import migrations, models
from django.db.models.expressions import CombinedExpression
from django.db.models.lookups import IsNull

INDEX = models.Index(
    condition=models.Q(IsNull(CombinedExpression(models.F("campaign_id"), "+", models.Value(0)), False)),
    fields=["recipient", "created_at"],
    name="notification_campaign_rcpt_idx",
)


def _create(apps, schema_editor):
    model = apps.get_model("notifications", "Notification")
    if schema_editor.connection.vendor == "postgresql":
        # A build that failed (cancelled, timed out) leaves an invalid index of this name behind, and the
        # migration unrecorded: dropped first, a re-run builds it again. (IF NOT EXISTS would keep it invalid.)
        schema_editor.remove_index(model, INDEX, concurrently=True)
        schema_editor.add_index(model, INDEX, concurrently=True)
    else:
        schema_editor.add_index(model, INDEX)


def _drop(apps, schema_editor):
    model = apps.get_model("notifications", "Notification")
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.remove_index(model, INDEX, concurrently=True)
    else:
        schema_editor.remove_index(model, INDEX)


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("notifications", "0029_notification_analyze_sooner")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.AddIndex(model_name="notification", index=INDEX)],
            database_operations=[migrations.RunPython(_create, _drop)],
        )
    ]
