"""A campaign's figures frozen before retention deletes its notifications (campaigns/archive.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0005_campaign_pacing"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="archive",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Its figures at archived_at: counts per state, outcome, SMS cost, waves.",
            ),
        ),
        migrations.AddField(
            model_name="campaign",
            name="archived_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When its figures were frozen: retention may delete its notifications since.",
                null=True,
            ),
        ),
    ]
