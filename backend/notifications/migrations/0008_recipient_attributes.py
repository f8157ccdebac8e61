"""Free attributes on a recipient (``{"plan": "gold", "orders": 7}``) for segment filters: schema only."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0007_notification_lease'),
    ]

    operations = [
        migrations.AddField(
            model_name='recipient',
            name='attributes',
            field=models.JSONField(blank=True, default=dict, help_text='Flat object of strings and numbers the company filters segments on.'),
        ),
    ]
