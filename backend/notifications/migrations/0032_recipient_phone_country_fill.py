"""Each existing recipient's phone country (0031), a thousand rows to a transaction, beside the phone it was made from.

Not atomic: each chunk commits on its own, so a large table is never locked for the whole fill,
and the web tier and workers keep reading and writing recipients meanwhile. A phone changed while
this runs is left with a pair that no longer matches, which deliveries do not trust (they parse
the number, as before), so no lock on the rows is needed either.

The country is computed here as ``pricing.phone_country`` computes it, without importing it: a
migration must keep running whatever later becomes of the application's code.
"""

import re

import phonenumbers
from django.db import migrations

CHUNK = 1000


def phone_country(number: str) -> str:
    """The ISO 3166-1 alpha-2 region of an international number, "" when it has none (as ``pricing.phone_country``)."""
    if not number.strip().startswith("+"):
        return ""
    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        return ""
    region = phonenumbers.region_code_for_number(parsed)
    if not region or not phonenumbers.is_valid_number_for_region(parsed, region):
        return ""
    return region if re.fullmatch(r"[A-Z]{2}", region) else ""


def fill(apps, schema_editor):
    """Store the country of every recipient's phone that has none stored for it yet."""
    Recipient = apps.get_model("notifications", "Recipient")
    pending = Recipient.objects.exclude(phone="").order_by("pk")
    last = 0
    while rows := list(pending.filter(pk__gt=last).values_list("pk", "phone", "phone_country_of")[:CHUNK]):
        stored = [
            Recipient(pk=pk, phone_country=phone_country(phone), phone_country_of=phone)
            for pk, phone, country_of in rows
            if country_of != phone
        ]
        Recipient.objects.bulk_update(stored, ["phone_country", "phone_country_of"])
        last = rows[-1][0]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("notifications", "0031_recipient_phone_country"),
    ]

    operations = [
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=True),
    ]
