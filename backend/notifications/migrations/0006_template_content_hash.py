"""Template versions carry the SHA-256 of their content, which approval binds to.

Schema first (the column, empty), then the backfill of every existing version
with ``models.template.content_hash`` (a pure function of the row's values);
the reverse empties the column before it is dropped.
"""

from django.db import migrations, models

from backend.notifications.models.template import CONTENT_FIELDS, content_hash


def hash_every_version(apps, schema_editor):
    TemplateVersion = apps.get_model("notifications", "TemplateVersion")
    versions = list(TemplateVersion.objects.only("pk", *CONTENT_FIELDS))
    for version in versions:
        version.content_hash = content_hash(*(getattr(version, name) for name in CONTENT_FIELDS))
    TemplateVersion.objects.bulk_update(versions, ["content_hash"], batch_size=1000)


def forget_hashes(apps, schema_editor):
    apps.get_model("notifications", "TemplateVersion").objects.update(content_hash="")


class Migration(migrations.Migration):

    dependencies = [
        ("notifications", "0005_policy_preferences_quiet_hours"),
    ]

    operations = [
        migrations.AddField(
            model_name="templateversion",
            name="content_hash",
            field=models.CharField(
                default="",
                editable=False,
                help_text="SHA-256 of kind, language, channel, subject and bodies.",
                max_length=64,
            ),
            preserve_default=False,
        ),
        migrations.RunPython(hash_every_version, forget_hashes),
    ]
