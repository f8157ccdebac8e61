"""Leases on claims: ``lease_until`` (renewed by a live worker, expired for a dead one's), and the two
partial indexes the sweeper's every-second scans use (expired claims; one tier's queued rows).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0006_template_content_hash'),
    ]

    operations = [
        migrations.AddField(
            model_name='notification',
            name='lease_until',
            field=models.DateTimeField(blank=True, help_text='While sending: the claiming worker holds it until then and renews it while alive.', null=True),
        ),
        migrations.AddIndex(
            model_name='notification',
            index=models.Index(condition=models.Q(('state', 'sending')), fields=['lease_until'], name='notification_lease_idx'),
        ),
        migrations.AddIndex(
            model_name='notification',
            index=models.Index(condition=models.Q(('state', 'queued')), fields=['priority', 'queued_at'], name='notification_tier_queue_idx'),
        ),
    ]
