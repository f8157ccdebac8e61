"""campaigns.segment_query: filter documents validated, then answered by one query over Recipient."""

import phonenumbers
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from backend.notifications.actions import upsert_recipient
from backend.notifications.models import Device, Recipient
from campaigns.segment_query import DefinitionError, count, recipients, sample, validate_definition

pytestmark = pytest.mark.django_db

# user id → contact data; each one there to be caught or missed by some row of the tables below.
PEOPLE = {
    "layla": {"language": "ar", "phone": "+966501234567", "time_zone": "Asia/Riyadh", "email": "layla@example.com",
              "attributes": {"plan": "gold", "orders": 5}},
    "dariush": {"language": "fa", "phone": "+989121234567", "time_zone": "Asia/Tehran",
                "attributes": {"plan": "silver", "orders": 12, "ltv.sar": 99.5}},
    "amy": {"language": "en", "phone": "+12125551234", "time_zone": "America/New_York", "email": "amy@example.com",
            "attributes": {"plan": "gold", "orders": 3, "a-b": "x"}},
    "chloe": {"language": "en", "phone": "+14165551234", "time_zone": "America/Toronto",
              "attributes": {"orders": "many"}},
    "bo": {"language": "en", "phone": "+12423221234", "time_zone": "America/Nassau", "attributes": {"orders": 10}},
    "ivan": {"language": "ru", "phone": "+79161234567", "time_zone": "Europe/Moscow", "attributes": {"orders": "7"}},
    "aigerim": {"language": "kk", "phone": "+77011234567", "time_zone": "Asia/Almaty", "attributes": {"orders": 10.5}},
    "noor": {"language": "ar", "email": "noor@example.com", "time_zone": "Asia/Riyadh", "attributes": {"plan": 7}},
}  # fmt: skip


@pytest.fixture
def people(db):
    for user_id, data in PEOPLE.items():
        upsert_recipient(user_id, data)
    Recipient.objects.filter(user_id="amy").update(email_bounced_at=timezone.now())
    Recipient.objects.filter(user_id="dariush").update(phone_disabled_at=timezone.now())
    Device.objects.create(recipient=Recipient.objects.get(user_id="layla"), platform="fcm", token="t-layla")
    Device.objects.create(
        recipient=Recipient.objects.get(user_id="bo"), platform="fcm", token="t-bo", disabled_at=timezone.now()
    )


def cond(field, value, op=None):
    return {"field": field, "value": value, **({"op": op} if op else {})}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ([cond("language", ["ar", "fa"], "in")], {"layla", "dariush", "noor"}),
        ([cond("language", "AR", "eq")], {"layla", "noor"}),
        ([cond("time_zone", ["Asia/Riyadh", "Asia/Tehran"], "in")], {"layla", "dariush", "noor"}),
        ([cond("country", "SA", "eq")], {"layla"}),
        ([cond("country", "sa", "eq")], {"layla"}),
        ([cond("country", ["US", "CA"], "in")], {"amy", "chloe"}),
        ([cond("country", "BS", "eq")], {"bo"}),
        ([cond("country", "KZ", "eq")], {"aigerim"}),
        ([cond("country", "RU", "eq")], {"ivan"}),
        ([cond("has_address", "email")], {"layla", "noor"}),  # amy's bounced
        ([cond("has_address", "sms")], {"layla", "amy", "chloe", "bo", "ivan", "aigerim"}),  # dariush's disabled
        ([cond("has_address", "push")], {"layla"}),  # bo's device is disabled
        ([cond("has_address", "inapp", "eq")], set(PEOPLE)),
        ([cond("attributes.plan", "gold", "eq")], {"layla", "amy"}),
        ([cond("attributes.plan", 7, "eq")], {"noor"}),
        ([cond("attributes.plan", ["silver", 7], "in")], {"dariush", "noor"}),
        ([cond("attributes.orders", 7, "eq")], set()),  # ivan's is the string "7"
        ([cond("attributes.orders", [3, 10], "between")], {"layla", "amy", "bo"}),
        ([cond("attributes.orders", 10, "gte")], {"dariush", "bo", "aigerim"}),  # never chloe's "many"
        ([cond("attributes.orders", 5, "lte")], {"layla", "amy"}),  # never the strings "many" and "7"
        ([cond("attributes.ltv.sar", 99.5, "eq")], {"dariush"}),
        ([cond("attributes.a-b", "x", "eq")], {"amy"}),
        ([cond("attributes.missing", "x", "eq")], set()),
        ([cond("language", "ar", "eq"), cond("has_address", "sms")], {"layla"}),
        ([{"any": [cond("country", "SA", "eq"), cond("attributes.orders", 12, "gte")]}], {"layla", "dariush"}),
    ],
)  # fmt: skip
def test_each_condition_selects_exactly_its_recipients(people, conditions, expected):
    definition = validate_definition({"all": conditions})
    assert set(recipients(definition).values_list("user_id", flat=True)) == expected
    assert count(definition) == len(expected)


def test_an_any_group_at_the_top_is_a_union(people):
    doc = {"any": [cond("language", "fa", "eq"), cond("country", "BS", "eq")]}
    assert set(recipients(doc).values_list("user_id", flat=True)) == {"dariush", "bo"}


NUMBERS = [
    "+966501234567", "+989121234567", "+12015550123", "+14165551234", "+15145551234", "+12423221234",
    "+18765551234", "+17875551234", "+18005551234", "+79161234567", "+77011234567", "+447911123456",
    "+447797123456", "+447400123456", "+358401234567", "+35818123456",
]  # fmt: skip


def test_country_agrees_with_phonenumbers_for_shared_calling_codes(db):
    for index, number in enumerate(NUMBERS):
        upsert_recipient(f"p{index}", {"phone": number})
    expected = {number: phonenumbers.region_code_for_number(phonenumbers.parse(number)) for number in NUMBERS}
    for region in sorted(set(expected.values())):
        found = set(recipients({"all": [cond("country", region, "eq")]}).values_list("phone", flat=True))
        assert found == {n for n, r in expected.items() if r == region}, region


def test_the_whole_filter_is_one_query(people):
    doc = {
        "all": [cond("has_address", "push"), cond("country", "CA", "eq"), cond("attributes.orders", [1, 9], "between")]
    }
    with CaptureQueriesContext(connection) as queries:
        count(doc)
    assert len(queries) == 1


def test_the_sample_is_ordered_by_user_id_and_bounded(people):
    doc = {"all": [cond("has_address", "inapp")]}
    assert [r.user_id for r in sample(doc, n=3)] == ["aigerim", "amy", "bo"]
    assert len(sample(doc)) == len(PEOPLE)
    with pytest.raises(ValueError, match=r"A sample has 1 to 100 recipients, not 0\."):
        sample(doc, n=0)


INAPP = cond("has_address", "inapp")


@pytest.mark.parametrize(
    ("doc", "path", "problem"),
    [
        ([], "", 'A group is an object with one key, "all" or "any", holding a list.'),
        ({"all": [], "any": []}, "", 'A group is an object with one key, "all" or "any", holding a list.'),
        ({"all": []}, "all",
         'Give a list of 1 to 100 conditions (for everyone: {"field": "has_address", "value": "inapp"}).'),
        ({"all": [INAPP] * 101}, "all",
         'Give a list of 1 to 100 conditions (for everyone: {"field": "has_address", "value": "inapp"}).'),
        ({"all": [{"any": [{"all": [{"any": [INAPP]}]}]}]}, "all[0].any[0].all[0]", "Groups may nest at most 3 deep."),
        ({"all": ["language"]}, "all[0]", 'A condition is an object with "field", "op" and "value" (or a group).'),
        ({"all": [cond("nickname", "x", "eq")]}, "all[0].field",
         "Unknown field 'nickname'; use language, country, time_zone, has_address or attributes.<key>."),
        ({"all": [{**INAPP, "negate": True}]}, "all[0].negate", "Unknown key: a condition has field, op and value."),
        ({"all": [cond("language", "xx", "eq")]}, "all[0].value",
         "Unknown language code 'xx'; use an ISO 639-1 code such as en, ar or fa."),
        ({"all": [INAPP, cond("language", ["ar", "zz"], "in")]}, "all[1].value[1]",
         "Unknown language code 'zz'; use an ISO 639-1 code such as en, ar or fa."),
        ({"all": [cond("language", "ar", "like")]}, "all[0].op", 'language takes "eq" (one value) or "in" (a list).'),
        ({"all": [cond("language", "ar", "in")]}, "all[0].value", '"in" takes a list of 1 to 1000 values.'),
        ({"all": [cond("language", [], "in")]}, "all[0].value", '"in" takes a list of 1 to 1000 values.'),
        ({"all": [cond("language", 7, "eq")]}, "all[0].value", "Must be a string."),
        ({"all": [cond("country", "XX", "eq")]}, "all[0].value",
         "Unknown country 'XX'; use an ISO 3166 code such as SA, IR or US."),
        ({"all": [cond("time_zone", "Mars/Olympus", "eq")]}, "all[0].value",
         "Unknown time zone 'Mars/Olympus'; use an IANA name such as Asia/Riyadh."),
        ({"all": [cond("has_address", "fax")]}, "all[0].value", "Use one channel of email, sms, push, inapp."),
        ({"all": [cond("has_address", "sms", "in")]}, "all[0].op", 'has_address takes no op (or "eq").'),
        ({"all": [cond("attributes.first name", "x", "eq")]}, "all[0].field",
         "An attribute key has 1 to 64 letters, digits, '_', '.' or '-', starting with a letter, without '__'."),
        ({"all": [cond("attributes.plan__gte", 1, "eq")]}, "all[0].field",
         "An attribute key has 1 to 64 letters, digits, '_', '.' or '-', starting with a letter, without '__'."),
        ({"all": [cond("attributes.0", 1, "eq")]}, "all[0].field",
         "An attribute key has 1 to 64 letters, digits, '_', '.' or '-', starting with a letter, without '__'."),
        ({"all": [cond("attributes.plan", "gold", "ne")]}, "all[0].op",
         "An attribute takes eq, in, gte, lte or between."),
        ({"all": [cond("attributes.plan", True, "eq")]}, "all[0].value", "Must be a string or a number."),
        ({"all": [cond("attributes.plan", ["a", None], "in")]}, "all[0].value[1]", "Must be a string or a number."),
        ({"all": [cond("attributes.plan", "go\x00ld", "eq")]}, "all[0].value", "Text may not contain NUL characters."),
        ({"all": [cond("attributes.plan", ["a", "\ud800"], "in")]}, "all[0].value[1]",
         "Text contains an unpaired surrogate (half an emoji): retype that character."),
        ({"all": [cond("attributes.orders", [3], "between")]}, "all[0].value",
         '"between" takes [low, high], both included.'),
        ({"all": [cond("attributes.orders", [3, "9"], "between")]}, "all[0].value[1]",
         "Must be a number between -2**53 and 2**53, not '9'."),
        ({"all": [cond("attributes.orders", 1e300, "gte")]}, "all[0].value",
         "Must be a number between -2**53 and 2**53, not 1e+300."),
        ({"all": [cond("attributes.orders", [10, 3], "between")]}, "all[0].value",
         "The low bound 10 is above the high bound 3."),
    ],
)  # fmt: skip
def test_a_bad_definition_names_the_bad_part(doc, path, problem):
    with pytest.raises(DefinitionError) as raised:
        validate_definition(doc)
    assert (raised.value.path, raised.value.problem) == (path, problem)
    assert str(raised.value) == (f"{path}: {problem}" if path else problem)


def test_the_normalised_document_reads_back_as_the_same_definition():
    doc = {
        "all": [
            cond("language", "AR", "eq"),
            cond("country", ["sa", "ca"], "in"),
            cond("has_address", "sms"),
            {"any": [cond("attributes.orders", 3, "gte"), cond("attributes.plan", "gold", "eq")]},
        ]
    }
    normalised = validate_definition(doc).to_document()
    assert normalised == {
        "all": [
            {"field": "language", "op": "eq", "value": "ar"},
            {"field": "country", "op": "in", "value": ["SA", "CA"]},
            {"field": "has_address", "op": "eq", "value": "sms"},
            {"any": [
                {"field": "attributes.orders", "op": "between", "value": [3, 2**53]},
                {"field": "attributes.plan", "op": "eq", "value": "gold"},
            ]},
        ]
    }  # fmt: skip
    assert validate_definition(normalised) == validate_definition(doc)
