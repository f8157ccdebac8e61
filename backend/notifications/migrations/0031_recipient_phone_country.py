"""The country of each recipient's phone, stored beside the phone it is the country of (filled by 0032).

``dispatch.sms_cost`` found each SMS's country with phonenumbers (parse, region, validity): 6–9 % of
a batch thread's CPU with half the backlog SMS (README "Delivery in batches"). The country is a
property of the number, so it is computed where the number is written (``Recipient.save``,
``RecipientQuerySet.bulk_create``). A delivery trusts it only while ``phone_country_of`` is still
the phone (``Recipient.known_phone_country``), and parses the number otherwise, as before: a writer
that changes the phone without them, or a row not filled yet, is priced the same as ever.

Both columns are added with a database default, so adding them writes no row on PostgreSQL.
"""

from django.db import migrations, models


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
                db_default="",
                default="",
                editable=False,
                help_text="ISO 3166-1 alpha-2 country of phone_country_of (phonenumbers' region); empty: none.",
                max_length=2,
            ),
        ),
        migrations.AddField(
            model_name="recipient",
            name="phone_country_of",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                editable=False,
                help_text="The phone that phone_country is the country of.",
                max_length=16,
            ),
        ),
    ]
