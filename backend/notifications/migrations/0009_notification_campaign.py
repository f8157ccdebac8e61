"""Which campaign made a notification, indexed with its state: a campaign's progress and its feeder's pick."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0001_campaigns"),
        ("notifications", "0008_recipient_attributes"),
    ]

    operations = [
        migrations.AddField(
            model_name="notification",
            name="campaign",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                help_text="The campaign whose fan-out made it (campaigns/fanout.py); indexed with state below.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="notifications",
                to="campaigns.campaign",
            ),
        ),
        migrations.AddIndex(
            model_name="notification",
            index=models.Index(fields=["campaign", "state"], name="notification_campaign_idx"),
        ),
    ]
