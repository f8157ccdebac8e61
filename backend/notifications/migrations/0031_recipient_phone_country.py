"""The country of each recipient's phone, stored beside it: a delivery prices an SMS without parsing the number.

``dispatch.sms_cost`` found each SMS's country with phonenumbers (parse, region, validity): 6 % of a
batch thread's CPU with half the backlog SMS (README "Delivery in batches"). The country is a property
of the number, so it is computed where the number is written (``Recipient.save`` and
``RecipientQuerySet``'s bulk writes) and read with the row. "" is "none, or not known": the delivery
parses the number then, as before, so a row this migration has not reached is priced the same.

The existing recipients with a phone get theirs here, a few thousand at a time.
"""

from django.db import migrations, models

from backend.notifications.pricing import phone_country

CHUNK = 5000


def fill(apps, schema_editor):
    """Set ``phone_country`` of every recipient with a phone."""
    Recipient = apps.get_model("notifications", "Recipient")
    pending = Recipient.objects.exclude(phone="").order_by("pk")
    last = 0
    while rows := list(pending.filter(pk__gt=last).values_list("pk", "phone")[:CHUNK]):
        changed = [Recipient(pk=pk, phone_country=phone_country(phone)) for pk, phone in rows]
        Recipient.objects.bulk_update(changed, ["phone_country"])
        last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0030_notification_campaign_recipient_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="recipient",
            name="phone_country",
            field=models.CharField(
                blank=True,
                default="",
                db_default="",
                editable=False,
                help_text="ISO 3166-1 alpha-2 country of the phone (phonenumbers' region), kept with it; "
                "empty: none or not known.",
                max_length=2,
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=True),
    ]
