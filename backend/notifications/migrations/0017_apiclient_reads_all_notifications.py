"""An API client may be allowed to list every client's notifications (GET /api/v1/notifications)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0016_template_review_history_and_staff_contact"),
    ]

    operations = [
        migrations.AddField(
            model_name="apiclient",
            name="reads_all_notifications",
            field=models.BooleanField(
                default=False,
                help_text="May list every client's notifications (GET /api/v1/notifications), not only its own: "
                "for a support or audit service.",
            ),
        ),
    ]
