"""Segment filters: a small JSON document → a validated ``Definition`` → a ``Q`` over ``Recipient``.

The document (what a segment stores in its ``definition``)::

    {"all": [
        {"field": "language", "op": "in", "value": ["ar", "fa"]},
        {"field": "country", "op": "eq", "value": "SA"},
        {"field": "time_zone", "op": "in", "value": ["Asia/Riyadh", "Asia/Tehran"]},
        {"field": "has_address", "value": "sms"},
        {"field": "attributes.plan", "op": "eq", "value": "gold"},
        {"field": "attributes.orders", "op": "between", "value": [3, 10]},
        {"any": [ … ]}
    ]}

A group is ``{"all": [...]}`` or ``{"any": [...]}`` (1–100 items, nested at most
``MAX_DEPTH`` deep). Fields and their operators:

- ``language`` (ISO 639-1), ``time_zone`` (IANA), ``country`` (ISO 3166 alpha-2
  from the E.164 phone): ``eq`` with one value, ``in`` with a list of 1–1,000.
- ``has_address``: ``email`` (set and not bounced), ``sms`` (set and not
  disabled), ``push`` (an enabled device), ``inapp`` (everyone); ``op`` may be
  left out or ``eq``.
- ``attributes.<key>``: ``eq`` / ``in`` on strings and numbers (type-strict:
  ``"7"`` is not ``7``), ``gte`` / ``lte`` / ``between`` (inclusive ``[low, high]``)
  on numbers; a recipient without the key, or with a string there, never matches
  a numeric test.

Everything becomes SQL: no row is read into Python to decide membership.

The work a filter costs is bounded twice. Before it runs: every recipient is put
through at most ``MAX_TESTS`` tests (a prefix, a regular expression, an ``IN`` list,
a key comparison), counted as ``Definition.q`` expands them; a country on a shared
calling code is one regular expression per region tried before it (+1 VI: 25), so
100 rows of 1,000 values are not a bound by themselves. While it runs: ``time_bound``
stops a count past ``NOTIFY["SEGMENT_COUNT_TIMEOUT"]`` seconds (``CountTimeout``).
"""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import phonenumbers
from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Exists, OuterRef, Q, QuerySet

from backend.notifications import locales, rendering
from backend.notifications.api.serializers import ATTRIBUTE_KEY, ATTRIBUTE_KEY_RULE, MAX_ATTRIBUTE_NUMBER
from backend.notifications.models import Device, Recipient

MAX_DEPTH = 3
MAX_ITEMS = 100
MAX_VALUES = 1000
MAX_SAMPLE = 100
# Tests a filter may put each recipient through (see the module docstring). Every region of +1 in one
# row is 325; 100 rows of "VI, …" are 2,600, which took SQLite over 60 s on 20,000 recipients.
MAX_TESTS = 400
# SQLite virtual-machine instructions between two looks at the clock (``deadline_handler``).
PROGRESS_STEPS = 10_000
ADDRESS_CHANNELS = ("email", "sms", "push", "inapp")
ATTRIBUTE_PREFIX = "attributes."
CLOSED_FIELDS = ("language", "time_zone", "country")
NUMERIC_OPS = ("gte", "lte", "between")


class DefinitionError(ValueError):
    """A segment definition that cannot be used; ``path`` names the bad part (``all[2].value``)."""

    def __init__(self, path: str, problem: str):
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}" if path else problem)


@dataclass(frozen=True)
class Condition:
    """One test: ``field`` as written, ``op`` (``eq``, ``in`` or ``between``) and ``value``.

    ``value`` is a tuple of normalised values for ``eq`` (one) and ``in``,
    ``(low, high)`` for ``between``, and the channel name for ``has_address``.
    """

    field: str
    op: str
    value: Any


@dataclass(frozen=True)
class Definition:
    """A validated filter: ``mode`` ``"all"`` or ``"any"`` over conditions and nested definitions."""

    mode: str
    items: tuple["Condition | Definition", ...]

    def to_document(self) -> dict:
        """The normalised JSON document (codes in their canonical case, every op written): store and hash this."""
        return {
            self.mode: [item.to_document() if isinstance(item, Definition) else _document(item) for item in self.items]
        }

    def q(self) -> Q:
        """The filter as a ``Q`` over ``Recipient``."""
        parts = [item.q() if isinstance(item, Definition) else _condition_q(item) for item in self.items]
        combined = parts[0]
        for part in parts[1:]:
            combined = combined & part if self.mode == "all" else combined | part
        return combined


class CountTimeout(Exception):
    """A count stopped after ``seconds`` (``time_bound``); the message tells the marketer what to do."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(
            f"Could not count the recipients in {seconds:g} s: simplify the filter (fewer rows or values)."
        )


def validate_definition(doc: object) -> Definition:
    """The ``Definition`` of a parsed JSON document; raises ``DefinitionError`` naming the bad part.

    A filter whose tests add up past ``MAX_TESTS`` is refused at the row that crosses it.
    """
    return _group(doc, "", 1, _Budget())


def tests(condition: Condition) -> int:
    """How many tests ``condition`` puts each recipient through, as ``_condition_q`` writes it."""
    if condition.field == "country":
        return sum(_country_tests(region) for region in condition.value)
    return 2 if condition.op == "between" else 1


def _country_tests(region: str) -> int:
    """One prefix test, or one regular expression for the region and each region of its code tried before it."""
    regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(phonenumbers.country_code_for_region(region), ())
    return 1 if len(regions) <= 1 else regions.index(region) + 1


class _Budget:
    """The tests spent so far while a document is validated, in reading order."""

    def __init__(self):
        self.spent = 0

    def spend(self, condition: Condition, path: str) -> None:
        cost = tests(condition)
        self.spent += cost
        if self.spent > MAX_TESTS:
            raise DefinitionError(
                path,
                f"This filter is too costly to count: this row adds {cost} tests per recipient and takes it to "
                f"{self.spent}, over {MAX_TESTS} (a country sharing a calling code, such as +1, costs one test "
                "per region tried before it). Remove rows or values.",
            )


@contextmanager
def time_bound(seconds: float | None = None, using: BaseDatabaseWrapper = connection) -> Iterator[None]:
    """Stop the queries run inside after ``seconds`` (default ``NOTIFY["SEGMENT_COUNT_TIMEOUT"]``).

    PostgreSQL: ``statement_timeout`` set locally in a transaction (a savepoint when one is open,
    whose rollback restores it), each statement bounded. SQLite: a progress handler that aborts the
    statement past the deadline, the whole block bounded. Raises ``CountTimeout`` instead of the
    database's error; other database errors pass through.
    """
    seconds = settings.NOTIFY["SEGMENT_COUNT_TIMEOUT"] if seconds is None else seconds
    try:
        if using.vendor == "postgresql":
            with transaction.atomic(using=using.alias), _statement_timeout(using, seconds):
                yield
        elif using.vendor == "sqlite":
            with _progress_deadline(using, seconds):
                yield
        else:
            yield
    except OperationalError as exc:
        if _stopped(exc):
            raise CountTimeout(seconds) from exc
        raise


@contextmanager
def _statement_timeout(using: BaseDatabaseWrapper, seconds: float) -> Iterator[None]:
    with using.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout')")
        (previous,) = cursor.fetchone()
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(max(1, round(seconds * 1000)))])
    yield
    with using.cursor() as cursor:
        cursor.execute("SELECT set_config('statement_timeout', %s, true)", [previous])


@contextmanager
def _progress_deadline(using: BaseDatabaseWrapper, seconds: float) -> Iterator[None]:
    using.ensure_connection()
    using.connection.set_progress_handler(deadline_handler(time.monotonic() + seconds), PROGRESS_STEPS)
    try:
        yield
    finally:
        using.connection.set_progress_handler(None, 0)


def deadline_handler(deadline: float, clock: Callable[[], float] = time.monotonic) -> Callable[[], int]:
    """A sqlite3 progress handler: non-zero (SQLite aborts the statement, "interrupted") once ``clock()`` passes
    ``deadline`` (seconds of the same clock)."""
    return lambda: int(clock() > deadline)


def _stopped(exc: OperationalError) -> bool:
    """Whether the error is a statement stopped by ``time_bound``: PostgreSQL's query_canceled, SQLite's interrupt."""
    return getattr(exc.__cause__, "sqlstate", None) == "57014" or str(exc) == "interrupted"


def recipients(definition: Definition | dict) -> QuerySet[Recipient]:
    """Every recipient the definition matches, as one query (a dict is validated first)."""
    if not isinstance(definition, Definition):
        definition = validate_definition(definition)
    return Recipient.objects.filter(definition.q())


def count(definition: Definition | dict) -> int:
    """How many recipients the definition matches (one ``COUNT(*)``)."""
    return recipients(definition).count()


def sample(definition: Definition | dict, n: int = 20) -> list[Recipient]:
    """The first ``n`` (1–100) matching recipients by user id: the same list for the same data."""
    if not 1 <= n <= MAX_SAMPLE:
        raise ValueError(f"A sample has 1 to {MAX_SAMPLE} recipients, not {n}.")
    return list(recipients(definition).order_by("user_id")[:n])


def _group(doc: object, path: str, depth: int, budget: _Budget) -> Definition:
    if not isinstance(doc, dict) or len(doc) != 1 or next(iter(doc)) not in ("all", "any"):
        raise DefinitionError(path, 'A group is an object with one key, "all" or "any", holding a list.')
    if depth > MAX_DEPTH:
        raise DefinitionError(path, f"Groups may nest at most {MAX_DEPTH} deep.")
    mode, items = next(iter(doc.items()))
    here = f"{path}.{mode}" if path else mode
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_ITEMS:
        everyone = '{"field": "has_address", "value": "inapp"}'
        raise DefinitionError(here, f"Give a list of 1 to {MAX_ITEMS} conditions (for everyone: {everyone}).")
    parsed = []
    for index, item in enumerate(items):
        item_path = f"{here}[{index}]"
        is_group = isinstance(item, dict) and ("all" in item or "any" in item)
        if is_group:
            parsed.append(_group(item, item_path, depth + 1, budget))
        else:
            parsed.append(_condition(item, item_path))
            budget.spend(parsed[-1], item_path)
    return Definition(mode, tuple(parsed))


def _condition(doc: object, path: str) -> Condition:
    if not isinstance(doc, dict) or "field" not in doc:
        raise DefinitionError(path, 'A condition is an object with "field", "op" and "value" (or a group).')
    unknown = sorted(set(doc) - {"field", "op", "value"})
    if unknown:
        raise DefinitionError(f"{path}.{unknown[0]}", "Unknown key: a condition has field, op and value.")
    field = doc["field"]
    if field == "has_address":
        return _has_address(doc, path)
    if field in CLOSED_FIELDS:
        return _closed(field, doc, path)
    if isinstance(field, str) and field.startswith(ATTRIBUTE_PREFIX):
        return _attribute(field, doc, path)
    raise DefinitionError(
        f"{path}.field",
        f"Unknown field {field!r}; use language, country, time_zone, has_address or attributes.<key>.",
    )


def _has_address(doc: dict, path: str) -> Condition:
    if doc.get("op", "eq") != "eq":
        raise DefinitionError(f"{path}.op", 'has_address takes no op (or "eq").')
    if doc.get("value") not in ADDRESS_CHANNELS:
        raise DefinitionError(f"{path}.value", f"Use one channel of {', '.join(ADDRESS_CHANNELS)}.")
    return Condition("has_address", "eq", doc["value"])


def _closed(field: str, doc: dict, path: str) -> Condition:
    op = doc.get("op")
    if op not in ("eq", "in"):
        raise DefinitionError(f"{path}.op", f'{field} takes "eq" (one value) or "in" (a list).')
    values = _values(doc.get("value"), op, f"{path}.value", (str,))
    normalise = {"language": str.lower, "country": str.upper, "time_zone": str}[field]
    normalised = tuple(normalise(value) for value in values)
    known = {"language": locales.language_codes(), "country": phonenumbers.SUPPORTED_REGIONS}.get(field)
    for index, value in enumerate(normalised):
        if value not in (known if known is not None else locales.time_zone_names()):
            where = f"{path}.value[{index}]" if op == "in" else f"{path}.value"
            raise DefinitionError(where, _unknown_message(field, values[index]))
    return Condition(field, op, normalised)


def _unknown_message(field: str, value: str) -> str:
    return {
        "language": f"Unknown language code {value!r}; use an ISO 639-1 code such as en, ar or fa.",
        "country": f"Unknown country {value!r}; use an ISO 3166 code such as SA, IR or US.",
        "time_zone": f"Unknown time zone {value!r}; use an IANA name such as Asia/Riyadh.",
    }[field]


def _attribute(field: str, doc: dict, path: str) -> Condition:
    key = field.removeprefix(ATTRIBUTE_PREFIX)
    if not ATTRIBUTE_KEY.fullmatch(key):
        raise DefinitionError(f"{path}.field", f"An attribute key has {ATTRIBUTE_KEY_RULE}.")
    op = doc.get("op")
    if op in ("eq", "in"):
        return Condition(field, op, _values(doc.get("value"), op, f"{path}.value", (str, int, float)))
    if op in NUMERIC_OPS:
        return Condition(field, "between", _bounds(op, doc.get("value"), f"{path}.value"))
    raise DefinitionError(f"{path}.op", "An attribute takes eq, in, gte, lte or between.")


def _values(value: object, op: str, path: str, types: tuple[type, ...]) -> tuple:
    """The operand of ``eq`` (one value) or ``in`` (a list) as a tuple, each of ``types`` and never a bool."""
    values = value if op == "in" else [value]
    if op == "in" and (not isinstance(value, list) or not 1 <= len(value) <= MAX_VALUES):
        raise DefinitionError(path, f'"in" takes a list of 1 to {MAX_VALUES} values.')
    kinds = "a string" if types == (str,) else "a string or a number"
    for index, item in enumerate(values):
        where = f"{path}[{index}]" if op == "in" else path
        if isinstance(item, bool) or not isinstance(item, types) or not _in_range(item):
            raise DefinitionError(where, f"Must be {kinds}.")
        # PostgreSQL's jsonb cannot compare with a NUL or an unpaired surrogate: the query would be a 500.
        problem = isinstance(item, str) and rendering.text_problem(item)
        if problem:
            raise DefinitionError(where, problem)
    return tuple(values)


def _bounds(op: str, value: object, path: str) -> tuple[float, float]:
    """``[low, high]`` of a numeric test; an open side is the largest attribute number, so strings never match."""
    numbers = value if op == "between" else [value]
    if op == "between" and (not isinstance(value, list) or len(value) != 2):
        raise DefinitionError(path, '"between" takes [low, high], both included.')
    for index, item in enumerate(numbers):
        if isinstance(item, bool) or not isinstance(item, int | float) or not _in_range(item):
            where = f"{path}[{index}]" if op == "between" else path
            raise DefinitionError(where, f"Must be a number between -2**53 and 2**53, not {item!r}.")
    low, high = {
        "gte": (value, MAX_ATTRIBUTE_NUMBER),
        "lte": (-MAX_ATTRIBUTE_NUMBER, value),
        "between": tuple(numbers),
    }[op]
    if low > high:
        raise DefinitionError(path, f"The low bound {low} is above the high bound {high}.")
    return low, high


def _in_range(item: object) -> bool:
    return not isinstance(item, int | float) or abs(item) <= MAX_ATTRIBUTE_NUMBER


def _document(condition: Condition) -> dict:
    """A condition as JSON; ``gte`` and ``lte`` come back as ``between`` with the open end at ±2**53."""
    value = condition.value
    if condition.field != "has_address":
        value = value[0] if condition.op == "eq" else list(value)
    return {"field": condition.field, "op": condition.op, "value": value}


def _condition_q(condition: Condition) -> Q:
    if condition.field == "has_address":
        return _address_q(condition.value)
    if condition.field == "country":
        return _any(_country_q(region) for region in condition.value)
    if condition.field in CLOSED_FIELDS:
        return Q(**{f"{condition.field}__in": condition.value})
    return _attribute_q(condition.field.removeprefix(ATTRIBUTE_PREFIX), condition.op, condition.value)


def _any(parts) -> Q:
    combined = Q(pk__in=[])
    for part in parts:
        combined |= part
    return combined


def _address_q(channel: str) -> Q:
    """Who has a usable address on ``channel`` (the same rule the send policy applies per notification)."""
    if channel == "email":
        return ~Q(email="") & Q(email_bounced_at__isnull=True)
    if channel == "sms":
        return ~Q(phone="") & Q(phone_disabled_at__isnull=True)
    if channel == "push":
        return Q(Exists(Device.objects.filter(recipient=OuterRef("pk"), disabled_at__isnull=True)))
    return Q(pk__isnull=False)  # in-app: everyone has an inbox


def _country_q(region: str) -> Q:
    """Phones of ``region`` by their E.164 prefix, in SQL.

    A calling code used by one region (+966 → SA) is a prefix test. Where
    regions share one (+1: US, CA and the Caribbean; +7: RU, KZ; +44: GB, JE,
    GG, IM…) the test follows phonenumbers' ``region_code_for_number``: the
    regions are tried in its order, a number belongs to the first whose
    ``leading_digits`` start it (+1 242 → BS) or, for a region without them,
    whose number patterns (fixed line, mobile, toll free…; the area codes of
    US or CA) it fits. So a region's test is "mine, and none of the earlier
    ones'", as anchored regular expressions. A number that fits no region of
    its code (an area code newer than the pinned phonenumbers) matches none.
    """
    code = phonenumbers.country_code_for_region(region)
    regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(code, ())
    if len(regions) <= 1:
        return Q(phone__startswith=f"+{code}")
    own = Q(phone__regex=_region_regex(code, region))
    for earlier in regions[: regions.index(region)]:
        own &= ~Q(phone__regex=_region_regex(code, earlier))
    return own


# The number types region_code_for_number tries (phonenumbers.phonenumberutil._number_type_helper).
_NUMBER_TYPES = (
    "premium_rate", "toll_free", "shared_cost", "voip", "personal_number", "pager", "uan", "voicemail",
    "fixed_line", "mobile",
)  # fmt: skip


def _region_regex(code: int, region: str) -> str:
    """An anchored regular expression (Python and PostgreSQL alike) for the E.164 numbers of ``region``."""
    metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
    if metadata.leading_digits:
        return rf"^\+{code}(?:{metadata.leading_digits})"
    descs = (getattr(metadata, name) for name in _NUMBER_TYPES)
    patterns = [desc.national_number_pattern for desc in descs if desc is not None and desc.national_number_pattern]
    return rf"^\+{code}(?:{'|'.join(patterns)})$"


def _attribute_q(key: str, op: str, value: tuple) -> Q:
    """JSON key tests Django compiles for PostgreSQL (jsonb) and SQLite (JSON1) alike.

    Ranges compare JSON with JSON rather than casting: a cast of ``"gold"`` to a
    number fails the whole query on PostgreSQL. Both bounds are always given, so
    a string never matches: jsonb orders every string below every number, SQLite
    every text above every number.
    """
    if op == "between":
        return _key_lookup(key, "gte", value[0]) & _key_lookup(key, "lte", value[1])
    return _key_lookup(key, "exact", value[0]) if op == "eq" else _key_lookup(key, "in", list(value))


def _key_lookup(key: str, lookup: str, value: object) -> Q:
    # ATTRIBUTE_KEY keeps "__" and numbers out of keys, so the lookup path names the key exactly.
    return Q(**{f"attributes__{key}__{lookup}": value})
