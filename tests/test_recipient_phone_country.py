"""``Recipient.phone_country``: the country of the phone, kept by every ORM write of the phone (models/recipient.py)."""

import importlib

import pytest
from django.apps import apps
from django.db import connection
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from backend.notifications.models import Recipient

pytestmark = pytest.mark.django_db

# (phone, its country as stored): phonenumbers' region, or "" for none (pricing.phone_country).
PHONES = [
    ("+966501234567", "SA"),
    ("+14155552671", "US"),
    ("+14165550123", "CA"),  # +1 is shared: the area code decides
    ("+989121234567", "IR"),
    ("+80012345678", ""),  # non-geographic
    ("", ""),
]


def stored(user_id: str) -> str:
    return Recipient.objects.values_list("phone_country", flat=True).get(user_id=user_id)


@pytest.mark.parametrize(("phone", "country"), PHONES)
def test_saving_a_recipient_stores_its_phones_country(phone, country):
    Recipient.objects.create(user_id="r", phone=phone)
    assert stored("r") == country


@pytest.mark.parametrize(("phone", "country"), PHONES)
def test_each_bulk_write_of_a_phone_stores_its_country(phone, country):
    Recipient.objects.bulk_create([Recipient(user_id="a", phone=phone), Recipient(user_id="b", phone="+966501234567")])
    assert (stored("a"), stored("b")) == (country, "SA")

    Recipient.objects.filter(user_id="b").update(phone=phone)
    assert stored("b") == country

    recipient = Recipient.objects.get(user_id="a")
    recipient.phone = "+971501234567"
    Recipient.objects.bulk_update([recipient], ["phone"])
    assert stored("a") == "AE"


def test_an_upsert_of_the_phone_stores_its_country_with_it():
    Recipient.objects.create(user_id="r", phone="+966501234567")
    Recipient.objects.bulk_create(
        [Recipient(user_id="r", phone="+14165550123")],
        update_conflicts=True,
        unique_fields=["user_id"],
        update_fields=["phone"],
    )
    assert Recipient.objects.values_list("phone", "phone_country").get(user_id="r") == ("+14165550123", "CA")


def test_saving_only_the_phone_stores_its_country_too_and_other_fields_leave_it():
    recipient = Recipient.objects.create(user_id="r", phone="+966501234567", language="ar")
    recipient.phone = "+14165550123"
    recipient.save(update_fields=["phone"])
    assert stored("r") == "CA"

    Recipient.objects.filter(user_id="r").update(phone_country="GB")  # a value no write of the phone gave
    recipient.language = "en"
    recipient.save(update_fields=["language"])
    Recipient.objects.update_or_create(user_id="r", defaults={"email": "r@example.com"})
    assert stored("r") == "GB"

    Recipient.objects.update_or_create(user_id="r", defaults={"phone": "+989121234567"})
    assert stored("r") == "IR"


def test_a_phone_written_by_an_expression_leaves_its_country_unknown():
    Recipient.objects.create(user_id="r", phone="+96650123456")
    Recipient.objects.filter(user_id="r").update(phone=Concat(F("phone"), Value("7")))
    assert Recipient.objects.get(user_id="r").phone == "+966501234567"
    assert stored("r") == ""  # read as "not known": a delivery parses the number


def test_the_migration_gives_each_existing_phone_its_country():
    Recipient.objects.bulk_create(Recipient(user_id=f"r{n}", phone=phone) for n, (phone, _) in enumerate(PHONES))
    Recipient.objects.update(phone_country="")  # as the column starts
    migration = importlib.import_module("backend.notifications.migrations.0031_recipient_phone_country")
    migration.fill(apps, None)
    assert [stored(f"r{n}") for n in range(len(PHONES))] == [country for _, country in PHONES]


def test_a_recipient_inserted_by_sql_that_names_no_country_has_it_unknown():
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Recipient._meta.db_table} (user_id, email, phone, language, time_zone, email_bounce,"
            " phone_disabled_reason, attributes, created_at, updated_at)"
            " VALUES ('raw', '', '+966501234567', 'en', 'UTC', '', '', '{}', %s, %s)",
            [timezone.now(), timezone.now()],
        )
    assert stored("raw") == ""  # a delivery parses the number, as for a row older than the column
