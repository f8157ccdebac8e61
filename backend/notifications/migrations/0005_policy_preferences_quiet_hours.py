"""Policy: kinds name their channels in order, their opt-out rule, over-limit behaviour and params; users
get quiet hours and per kind × channel preferences; digests; SMS-pumping velocity alarms.

The single default_channel becomes the first of channels, backfilled before it is dropped.
"""

import backend.notifications.models.kind
import django.db.models.deletion
from django.db import migrations, models


def channels_from_default_channel(apps, schema_editor):
    Kind = apps.get_model("notifications", "Kind")
    for kind in Kind.objects.all():
        kind.channels = [kind.default_channel]
        kind.opt_out_allowed = kind.category != "security"
        kind.save(update_fields=["channels", "opt_out_allowed"])


def default_channel_from_channels(apps, schema_editor):
    Kind = apps.get_model("notifications", "Kind")
    for kind in Kind.objects.all():
        kind.default_channel = (kind.channels or ["email"])[0]
        kind.save(update_fields=["default_channel"])


class Migration(migrations.Migration):

    dependencies = [
        ('notifications', '0004_template_authorship_and_approval'),
    ]

    operations = [
        migrations.CreateModel(
            name='VelocityAlarm',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('country', models.CharField(max_length=2)),
                ('count', models.PositiveIntegerField(help_text='OTP SMS to that country in the minute.')),
                ('threshold', models.PositiveIntegerField()),
                ('at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['-at'],
            },
        ),
        migrations.AddField(
            model_name='kind',
            name='channels',
            field=models.JSONField(default=list, help_text='Channels in order of preference, e.g. ["push", "sms", "email"].', validators=[backend.notifications.models.kind._validate_channels]),
        ),
        migrations.AddField(
            model_name='kind',
            name='opt_out_allowed',
            field=models.BooleanField(default=True, help_text='Users may turn it off. Never for security kinds (OTP, security alerts).'),
        ),
        migrations.AddField(
            model_name='kind',
            name='over_limit',
            field=models.CharField(choices=[('suppress', 'Suppress it'), ('digest', 'Fold it into one digest sent when the window reopens')], default='suppress', max_length=8),
        ),
        migrations.AddField(
            model_name='kind',
            name='params',
            field=models.JSONField(blank=True, default=dict, validators=[backend.notifications.models.kind._validate_params]),
        ),
        migrations.AddField(
            model_name='notification',
            name='digest',
            field=models.ForeignKey(blank=True, help_text='Over the rate limit and folded into this digest notification.', null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='digested', to='notifications.notification'),
        ),
        migrations.AddField(
            model_name='recipient',
            name='quiet_hours_end',
            field=models.TimeField(blank=True, help_text='Local wall time, e.g. 07:00.', null=True),
        ),
        migrations.AddField(
            model_name='recipient',
            name='quiet_hours_start',
            field=models.TimeField(blank=True, help_text='Local wall time, e.g. 22:00.', null=True),
        ),
        migrations.CreateModel(
            name='Preference',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('channel', models.CharField(max_length=8)),
                ('enabled', models.BooleanField()),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('kind', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='notifications.kind')),
                ('recipient', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='preferences', to='notifications.recipient')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('recipient', 'kind', 'channel'), name='preference_unique')],
            },
        ),
        migrations.RunPython(channels_from_default_channel, default_channel_from_channels),
        migrations.RemoveField(
            model_name='kind',
            name='default_channel',
        ),
    ]
