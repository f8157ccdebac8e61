"""The fan-out's mark on a campaign (every recipient has a notification) and the start / done audit actions."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0001_campaigns"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="fanned_out_at",
            field=models.DateTimeField(
                blank=True,
                help_text="When the fan-out had made a notification for every recipient (fanout.py).",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="campaignaudit",
            name="action",
            field=models.CharField(
                choices=[
                    ("create", "Created"),
                    ("edit", "Edited"),
                    ("submit", "Submitted"),
                    ("approve", "Approved"),
                    ("reject", "Rejected"),
                    ("void", "Approval voided"),
                    ("cancel", "Cancelled"),
                    ("start", "Started"),
                    ("done", "Done"),
                ],
                max_length=8,
            ),
        ),
    ]
