"""The notification table: fewer index entries for each state change of a delivery.

A notification's row is written three times: inserted, claimed (``sending``) and moved to ``sent``.
Both moves change ``state``, so neither is a HOT update: each writes a new entry in every index whose
condition the new row version meets. Before, that was eight or nine B-trees per move; an API
notification now meets four (primary key, idempotency key, recipient, and the lease index while
``sending`` or the reference index once ``sent``):

- ``kind`` and ``template_version`` lose their foreign-key indexes: the send path and the API read
  by kind with the recipient, and nothing reads rows by template version (versions are never
  deleted). What now reads the table, about 0.1–0.3 s at 1,000,000 rows: the admin's filter by kind
  (or by state), deleting a kind (which PROTECT refuses while any row has it) and the
  ``mask_secret_params`` command.
- ``notification_state_idx`` (state, queued_at) over every row is gone: the sweeper's queued scans
  use ``notification_tier_queue_idx``, its lease scan ``notification_lease_idx``, and its scan of
  due API rows the new ``notification_scheduled_idx`` (send_at, where scheduled and not a campaign's).
- ``notification_campaign_idx`` holds a campaign's rows only; every read of it names a campaign.
- ``notification_provider_ref_idx`` (provider, provider_ref) is gone: ``notification_ref_search_idx``
  (provider_ref) finds a delivery receipt's row, whose provider is then checked on that one row.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0005_campaign_pacing"),
        ("notifications", "0023_attempt_indexes_for_hot_updates"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="notification",
            name="notification_state_idx",
        ),
        migrations.RemoveIndex(
            model_name="notification",
            name="notification_campaign_idx",
        ),
        migrations.RemoveIndex(
            model_name="notification",
            name="notification_provider_ref_idx",
        ),
        # State only: an AlterField of a foreign key drops and re-adds its constraint, which checks every row.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="notification",
                    name="kind",
                    field=models.ForeignKey(
                        db_index=False,
                        help_text="Not indexed: the product reads by kind with the recipient (notification_recipient_idx).",
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="notifications",
                        to="notifications.kind",
                    ),
                ),
                migrations.AlterField(
                    model_name="notification",
                    name="template_version",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="Not indexed: nothing reads notifications by version, and versions are never deleted.",
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="notifications.templateversion",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {name}", f"CREATE INDEX {name} ON notifications_notification ({column})"
                )
                for name, column in [
                    ("notifications_notification_kind_id_0b96d714", "kind_id"),
                    ("notifications_notification_template_version_id_7b39e715", "template_version_id"),
                ]
            ],
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("campaign__isnull", True), ("state", "scheduled")),
                fields=["send_at"],
                name="notification_scheduled_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("campaign__isnull", False)),
                fields=["campaign", "state"],
                name="notification_campaign_idx",
            ),
        ),
    ]
