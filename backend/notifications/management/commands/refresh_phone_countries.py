"""Store again the country of every recipient's phone (``Recipient.phone_country``), by the current phonenumbers.

Run it after upgrading phonenumbers (``requirements/base.txt``): its metadata decides a number's
country (a new range inside +44 or +7, say), and a stored country follows the metadata of the day
the phone was written. Safe to run again and while the web tier and workers run: each recipient is
written only if its phone is still the one its country was computed from.
"""

from django.core.management.base import BaseCommand

from backend.notifications.models import Recipient
from backend.notifications.pricing import phone_country


class Command(BaseCommand):
    help = "Compute each recipient's phone country again (after upgrading phonenumbers); prints how many changed."

    def add_arguments(self, parser):
        parser.add_argument("--chunk", type=int, default=1000, help="Recipients read and written per transaction.")

    def handle(self, chunk: int, **options):
        changed, last = 0, 0
        pending = Recipient.objects.order_by("pk").values_list("pk", "phone", "phone_country", "phone_country_of")
        while rows := list(pending.filter(pk__gt=last)[: max(1, chunk)]):
            for pk, phone, country, country_of in rows:
                fresh = phone_country(phone)
                if (fresh, phone) != (country, country_of):
                    # Only while the phone is the one read: a phone written meanwhile brought its own country.
                    updated = Recipient.objects.filter(pk=pk, phone=phone).update(
                        phone_country=fresh, phone_country_of=phone
                    )
                    changed += updated
            last = rows[-1][0]
        self.stdout.write(f"{changed} recipients' phone countries stored again.")
