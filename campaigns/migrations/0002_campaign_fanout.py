"""The fan-out's progress on a campaign (the last recipient made, when every one had a notification)
and the start / done audit actions.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0001_campaigns"),
    ]

    operations = [
        migrations.AddField(
            model_name="campaign",
            name="fanout_last_recipient",
            field=models.PositiveBigIntegerField(
                default=0, help_text="Recipients up to this id have their notification: the fan-out resumes after it."
            ),
        ),
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
