"""Idempotency keys become unique per API client, not globally.

Two services that pick the same key (``order-5012``) must not swallow each
other's notifications. Schema, backfill and constraint are separate steps.
"""

from django.db import migrations, models


def backfill_scope(apps, schema_editor):
    Notification = apps.get_model("notifications", "Notification")
    Notification.objects.filter(client__isnull=False).update(
        idempotency_scope=models.functions.Concat(
            models.Value("client:"), models.functions.Cast("client_id", models.CharField())
        )
    )
    Notification.objects.filter(client__isnull=True).update(idempotency_scope="internal")


def clear_scope(apps, schema_editor):
    apps.get_model("notifications", "Notification").objects.update(idempotency_scope="")


class Migration(migrations.Migration):
    dependencies = [("notifications", "0002_delivery_engine")]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="idempotency_scope",
            field=models.CharField(
                default="",
                help_text="Whose key it is: client:<id> for an API client; keys never collide across scopes.",
                max_length=40,
            ),
            preserve_default=False,
        ),
        migrations.RunPython(backfill_scope, clear_scope),
        migrations.AlterField(
            model_name="notification",
            name="idempotency_key",
            field=models.CharField(db_index=True, max_length=255),
        ),
        migrations.AddConstraint(
            model_name="notification",
            constraint=models.UniqueConstraint(
                fields=("idempotency_scope", "idempotency_key"), name="notification_idempotency"
            ),
        ),
    ]
