"""Fewer indexes for a campaign's million inserts: drop the covered ones, keep only filled rows in the sparse ones.

- ``idempotency_key`` alone (and its ``varchar_pattern_ops`` twin): every lookup names the scope too,
  which the UNIQUE (scope, key) index serves; the admin's search is a substring match no B-tree serves.
- ``recipient_id`` alone: ``notification_recipient_idx`` (recipient, -created_at) starts with it.
- ``client_id``, ``digest_id``, ``(provider, provider_ref)``: partial, only where set; a lookup by a
  value implies the condition, so the same queries use them.

The foreign-key indexes are dropped by name (Django's ``AlterField`` would drop and re-add, and so
re-validate, each foreign key on the whole table); the state change is Django's usual one.
"""

import django.db.models.deletion
from django.db import migrations, models

# Django's names for the indexes that db_index=True made in 0001 (deterministic: table, column, hash).
DROPPED = [
    "notifications_notification_idempotency_key_0aab04ad",
    "notifications_notification_idempotency_key_0aab04ad_like",
    "notifications_notification_recipient_id_d055f3f0",
    "notifications_notification_client_id_3cea6756",
    "notifications_notification_digest_id_c54845ff",
]
RECREATED = {
    "notifications_notification_idempotency_key_0aab04ad": '("idempotency_key")',
    "notifications_notification_recipient_id_d055f3f0": '("recipient_id")',
    "notifications_notification_client_id_3cea6756": '("client_id")',
    "notifications_notification_digest_id_c54845ff": '("digest_id")',
}


def _drop(apps, schema_editor):
    for name in DROPPED:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


def _recreate(apps, schema_editor):
    table = "notifications_notification"
    for name, columns in RECREATED.items():
        schema_editor.execute(f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" {columns}')
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            'CREATE INDEX IF NOT EXISTS "notifications_notification_idempotency_key_0aab04ad_like"'
            f' ON "{table}" ("idempotency_key" varchar_pattern_ops)'
        )


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0003_campaign_preflight_origin_cancel"),
        ("notifications", "0010_notification_cancelled"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="notification",
                    name="idempotency_key",
                    field=models.CharField(max_length=255),
                ),
                migrations.AlterField(
                    model_name="notification",
                    name="client",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="Indexed below where set: a campaign's rows have none.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="notifications",
                        to="notifications.apiclient",
                    ),
                ),  # fmt: skip
                migrations.AlterField(
                    model_name="notification",
                    name="digest",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        help_text="Over the rate limit and folded into this digest notification (indexed below where set).",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="digested",
                        to="notifications.notification",
                    ),
                ),  # fmt: skip
                migrations.AlterField(
                    model_name="notification",
                    name="recipient",
                    field=models.ForeignKey(
                        db_index=False,
                        help_text="Indexed by notification_recipient_idx, whose first column it is.",
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="notifications",
                        to="notifications.recipient",
                    ),
                ),  # fmt: skip
            ],
            database_operations=[migrations.RunPython(_drop, _recreate)],
        ),
        migrations.RemoveIndex(model_name="notification", name="notification_provider_ref_idx"),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("provider_ref", ""), _negated=True),
                fields=["provider", "provider_ref"],
                name="notification_provider_ref_idx",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("client__isnull", False)), fields=["client"], name="notification_client_idx"
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(
                condition=models.Q(("digest__isnull", False)), fields=["digest"], name="notification_digest_idx"
            ),
        ),
    ]
