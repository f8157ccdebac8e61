"""Attempt rows: no index on the provider's reference, and the device's index only where there is one.

Every delivery inserts an attempt row before its call and records the result after it. The result
sets ``provider_ref``, which ``attempt_provider_ref_idx`` indexed, so that update could never be a
HOT update and wrote a new entry in each of the table's indexes; nothing reads attempts by reference
(delivery receipts and the support explorer find it on the notification, the admin's search is a
substring match no B-tree serves). The device's foreign-key index held a NULL for every SMS, e-mail
and in-app attempt; partial, it holds push attempts only, which is all that deleting a device reads.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notifications", "0022_notification_campaign_sent_index")]

    operations = [
        migrations.RemoveIndex(model_name="attempt", name="attempt_provider_ref_idx"),
        migrations.AlterField(
            model_name="attempt",
            name="device",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="attempts",
                to="notifications.device",
            ),
        ),
        migrations.AddIndex(
            model_name="attempt",
            index=models.Index(
                condition=models.Q(("device__isnull", False)), fields=["device"], name="attempt_device_idx"
            ),
        ),
    ]
