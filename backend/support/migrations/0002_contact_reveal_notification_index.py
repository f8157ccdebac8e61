"""An index on the reveal audit's notification: retention's deletes check it and set it to NULL."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0025_api_client_name_rule"),
        ("support", "0001_contact_reveal"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="contactreveal",
            index=models.Index(
                condition=models.Q(("notification__isnull", False)),
                fields=["notification"],
                name="contactreveal_notification_idx",
            ),
        ),
    ]
