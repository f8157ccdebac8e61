"""The country stored with a recipient's phone (models/recipient.py), and when a delivery may trust it."""

import importlib
import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.models import F, Value
from django.db.models.functions import Concat
from django.utils import timezone

from backend.notifications import pricing
from backend.notifications.models import Recipient

pytestmark = pytest.mark.django_db

# (phone, its country as stored): phonenumbers' region, or "" for none (pricing.phone_country).
PHONES = [
    ("+966501234567", "SA"),
    ("+14155552671", "US"),
    ("+14165550123", "CA"),  # +1 is shared: the area code decides
    ("+447911123456", "GG"),  # a Guernsey mobile range inside +44
    ("+989121234567", "IR"),
    ("+80012345678", ""),  # non-geographic
    ("+96612", ""),  # not valid for its country
    ("", ""),
]


def known(user_id: str) -> str:
    return Recipient.objects.get(user_id=user_id).known_phone_country


@pytest.mark.parametrize(("phone", "country"), PHONES)
def test_saving_a_recipient_stores_its_phones_country(phone, country):
    Recipient.objects.create(user_id="r", phone=phone)
    stored = Recipient.objects.values_list("phone_country", "phone_country_of").get(user_id="r")
    assert stored == (country, phone)
    assert known("r") == country


@pytest.mark.parametrize(("phone", "country"), PHONES)
def test_creating_recipients_in_bulk_stores_each_phones_country(phone, country):
    Recipient.objects.bulk_create([Recipient(user_id="a", phone=phone), Recipient(user_id="b", phone="+966501234567")])
    assert (known("a"), known("b")) == (country, "SA")


def test_an_upsert_of_the_phone_stores_its_country_with_it():
    Recipient.objects.create(user_id="r", phone="+966501234567")
    Recipient.objects.bulk_create(
        [Recipient(user_id="r", phone="+14165550123")],
        update_conflicts=True,
        unique_fields=["user_id"],
        update_fields=["phone"],
    )
    assert known("r") == "CA"


def test_saving_the_phone_alone_stores_its_country_and_saving_other_fields_leaves_it():
    recipient = Recipient.objects.create(user_id="r", phone="+966501234567", language="ar")
    recipient.phone = "+14165550123"
    recipient.save(update_fields=(name for name in ["phone"]))  # any iterable, as Django takes
    assert known("r") == "CA"

    Recipient.objects.filter(user_id="r").update(phone_country="GB")  # a value no write of the phone gave
    recipient.language = "en"
    recipient.save(update_fields=["language"])
    Recipient.objects.update_or_create(user_id="r", defaults={"email": "r@example.com"})
    assert known("r") == "GB"

    Recipient.objects.update_or_create(user_id="r", defaults={"phone": "+989121234567"})
    assert known("r") == "IR"


def test_saving_a_recipient_whose_phone_was_not_loaded_leaves_phone_and_country_alone(django_assert_num_queries):
    Recipient.objects.create(user_id="r", phone="+966501234567")
    recipient = Recipient.objects.only("pk", "user_id", "language").get(user_id="r")
    recipient.language = "ar"
    with django_assert_num_queries(1):  # the UPDATE: the phone is not read to compute its country
        recipient.save()
    assert known("r") == "SA"


@pytest.mark.parametrize(
    "change",
    [
        lambda rows: rows.update(phone="+14165550123"),
        lambda rows: rows.update(phone=Concat(Value("+1416555"), Value("0123"))),
        lambda rows: connection.cursor().execute(
            f"UPDATE {Recipient._meta.db_table} SET phone = '+14165550123' WHERE user_id = 'r'"
        ),
    ],
    ids=["update", "expression", "sql"],
)
def test_a_phone_changed_without_its_country_is_not_trusted_with_the_old_one(change):
    Recipient.objects.create(user_id="r", phone="+966501234567")
    change(Recipient.objects.filter(user_id="r"))
    recipient = Recipient.objects.get(user_id="r")
    assert (recipient.phone, recipient.phone_country) == ("+14165550123", "SA")  # stale beside the new phone
    assert recipient.known_phone_country == ""  # so a delivery parses the number: CA


def test_a_phone_set_to_an_expression_is_saved_with_no_country_known():
    recipient = Recipient.objects.create(user_id="r", phone="+96650123456")
    recipient.phone = Concat(F("phone"), Value("7"))
    recipient.save()
    assert Recipient.objects.get(user_id="r").phone == "+966501234567"
    assert known("r") == ""


def test_a_recipient_inserted_by_sql_that_names_no_country_has_none_known():
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Recipient._meta.db_table} (user_id, email, phone, language, time_zone, email_bounce,"
            " phone_disabled_reason, attributes, created_at, updated_at)"
            " VALUES ('raw', '', '+966501234567', 'en', 'UTC', '', '', '{}', %s, %s)",
            [timezone.now(), timezone.now()],
        )
    assert Recipient.objects.values_list("phone_country", "phone_country_of").get(user_id="raw") == ("", "")
    assert known("raw") == ""


FILL = importlib.import_module("backend.notifications.migrations.0032_recipient_phone_country_fill")


@pytest.mark.parametrize(("phone", "country"), [*PHONES, ("0501234567", ""), ("+abc", "")])
def test_the_fill_computes_a_country_as_pricing_does(phone, country):
    assert FILL.phone_country(phone) == pricing.phone_country(phone) == country


def test_the_fill_gives_each_existing_phone_its_country_and_leaves_what_is_stored():
    Recipient.objects.bulk_create(Recipient(user_id=f"r{n}", phone=phone) for n, (phone, _) in enumerate(PHONES))
    Recipient.objects.update(phone_country="", phone_country_of="")  # as the columns start
    Recipient.objects.filter(user_id="r0").update(phone_country="GB", phone_country_of=PHONES[0][0])
    state = MigrationExecutor(connection).loader.project_state(("notifications", "0032_recipient_phone_country_fill"))

    FILL.fill(state.apps, None)

    assert [known(f"r{n}") for n in range(len(PHONES))] == ["GB"] + [country for _, country in PHONES[1:]]


def test_refreshing_stores_again_what_differs_from_the_current_rule():
    Recipient.objects.bulk_create(Recipient(user_id=f"r{n}", phone=phone) for n, (phone, _) in enumerate(PHONES))
    Recipient.objects.filter(user_id="r0").update(phone_country="GB")  # as a former metadata would have had it
    Recipient.objects.filter(user_id="r1").update(phone_country="", phone_country_of="")  # never stored
    out = io.StringIO()

    call_command("refresh_phone_countries", "--chunk", "3", stdout=out)

    assert out.getvalue() == "2 recipients' phone countries stored again.\n"
    assert [known(f"r{n}") for n in range(len(PHONES))] == [country for _, country in PHONES]
    call_command("refresh_phone_countries", stdout=out)
    assert out.getvalue().endswith("0 recipients' phone countries stored again.\n")
