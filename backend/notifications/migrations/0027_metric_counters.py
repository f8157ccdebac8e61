"""The running totals of /metrics where no Redis is configured (the embedded default): metric_counters.py."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("notifications", "0026_api_client_name_check")]

    operations = [
        migrations.CreateModel(
            name="MetricCounter",
            fields=[
                ("name", models.CharField(max_length=200, primary_key=True, serialize=False)),
                ("value", models.BigIntegerField(default=0)),
            ],
        ),
    ]
