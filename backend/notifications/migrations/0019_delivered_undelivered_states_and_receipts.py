"""Final states delivered / undelivered, and the delivery receipts the SMS providers post (receipts/).

The state columns only gain choices: no SQL, so their "C" collation (0018) stays. A receipt is kept
once per (notification, status, code); that UNIQUE index also serves the lookup by notification.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0018_opaque_codes_compare_bytewise'),
    ]

    operations = [
        migrations.AlterField(
            model_name='notification',
            name='state',
            field=models.CharField(choices=[('queued', 'Queued'), ('scheduled', 'Scheduled'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed'), ('suppressed', 'Suppressed'), ('expired', 'Expired'), ('cancelled', 'Cancelled'), ('delivered', 'Delivered'), ('undelivered', 'Undelivered')], default='queued', max_length=12),
        ),
        migrations.AlterField(
            model_name='statechange',
            name='from_state',
            field=models.CharField(blank=True, choices=[('queued', 'Queued'), ('scheduled', 'Scheduled'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed'), ('suppressed', 'Suppressed'), ('expired', 'Expired'), ('cancelled', 'Cancelled'), ('delivered', 'Delivered'), ('undelivered', 'Undelivered')], max_length=12),
        ),
        migrations.AlterField(
            model_name='statechange',
            name='to_state',
            field=models.CharField(choices=[('queued', 'Queued'), ('scheduled', 'Scheduled'), ('sending', 'Sending'), ('sent', 'Sent'), ('failed', 'Failed'), ('suppressed', 'Suppressed'), ('expired', 'Expired'), ('cancelled', 'Cancelled'), ('delivered', 'Delivered'), ('undelivered', 'Undelivered')], max_length=12),
        ),
        migrations.CreateModel(
            name='Receipt',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('provider', models.CharField(max_length=32)),
                ('provider_ref', models.CharField(max_length=255)),
                ('status', models.CharField(max_length=32)),
                ('code', models.CharField(blank=True, max_length=16)),
                ('meaning', models.CharField(blank=True, max_length=255)),
                ('outcome', models.CharField(choices=[('sent', 'Still on its way'), ('delivered', 'Delivered'), ('undelivered', 'Undelivered')], max_length=12)),
                ('received_at', models.DateTimeField(auto_now_add=True)),
                ('notification', models.ForeignKey(db_index=False, help_text='Indexed by receipt_once, whose first column it is.', on_delete=django.db.models.deletion.CASCADE, related_name='receipts', to='notifications.notification')),
            ],
            options={
                'ordering': ['received_at', 'id'],
                'constraints': [models.UniqueConstraint(fields=('notification', 'status', 'code'), name='receipt_once')],
            },
        ),
    ]
