"""The segment form's condition rows → a segment_query document, and its errors → the row they belong to.

A row is what the page posts as parallel lists: ``field`` (``language``,
``country``, ``time_zone``, ``has_address`` or ``attribute``), ``key`` (the
attribute's key), ``op`` (``eq``, ``in``, ``gte``, ``lte``, ``between``) and
``value`` as typed. ``in`` takes values separated by commas; ``between`` two
numbers (``3, 10``). An attribute value that reads as a JSON number is a number,
anything else (or a value in double quotes) a string: type-strict, as the query is.
A row without a field is left out. Validation itself is ``segment_query``'s.
"""

import json
import re
from dataclasses import dataclass, field

from django.http import QueryDict

from campaigns.segment_query import Definition, DefinitionError, validate_definition

FIELDS = (
    ("language", "Language"),
    ("country", "Country (from the phone)"),
    ("time_zone", "Time zone"),
    ("has_address", "Has an address on"),
    ("attribute", "Attribute"),
)
OPS = (("eq", "is"), ("in", "is one of"), ("gte", "≥"), ("lte", "≤"), ("between", "between"))
MAX_ROWS = 100
_ROW_PATH = re.compile(r"^all\[(\d+)\]")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass
class Row:
    """One condition row as posted, and the message for it (empty when fine)."""

    field: str = ""
    key: str = ""
    op: str = "eq"
    value: str = ""
    error: str = ""

    @property
    def blank(self) -> bool:
        return not self.field


@dataclass
class Built:
    """The rows (each with its error), the definition when every row is valid, and an error for the whole filter."""

    rows: list[Row]
    definition: Definition | None = None
    error: str = ""
    used: list[int] = field(default_factory=list)

    @property
    def has_row_errors(self) -> bool:
        """Whether a row is marked with its error (else nothing was counted because no row is filled yet)."""
        return any(row.error for row in self.rows)


def rows_from(data: QueryDict) -> list[Row]:
    """The posted rows (at most ``MAX_ROWS``), in page order."""
    columns = [data.getlist(name)[:MAX_ROWS] for name in ("field", "key", "op", "value")]
    count = max(len(column) for column in columns)
    padded = [column + [""] * (count - len(column)) for column in columns]
    return [Row(f.strip(), k.strip(), o.strip() or "eq", v.strip()) for f, k, o, v in zip(*padded, strict=True)]


def build(rows: list[Row]) -> Built:
    """Validate the non-blank rows as ``{"all": [...]}``; an error lands on its row (or the whole filter)."""
    built = Built(rows)
    conditions = []
    for index, row in enumerate(rows):
        if row.blank:
            continue
        try:
            conditions.append(_condition(row))
        except ValueError as exc:
            row.error = str(exc)
            continue
        built.used.append(index)
    if any(row.error for row in rows):
        return built
    if not conditions:
        built.error = "Add at least one condition (for everyone: has an address on inapp)."
        return built
    try:
        built.definition = validate_definition({"all": conditions})
    except DefinitionError as exc:
        _place(built, exc)
    return built


def _place(built: Built, exc: DefinitionError) -> None:
    """Put the error on the row its path names (``all[2].value[1]`` → the third condition used)."""
    match = _ROW_PATH.match(exc.path)
    if match and int(match.group(1)) < len(built.used):
        built.rows[built.used[int(match.group(1))]].error = exc.problem
    else:
        built.error = str(exc)


def _condition(row: Row) -> dict:
    """A row as a document condition; raises ``ValueError`` for what only the form can get wrong."""
    if not (row.key.isprintable() and row.value.isprintable()):
        # A NUL inside a JSON value is refused by PostgreSQL's jsonb: a 500, were it sent to the query.
        raise ValueError("Remove the control character (a tab, a NUL…) from this row.")
    if row.field == "has_address":
        return {"field": "has_address", "value": row.value}
    if row.field == "attribute":
        if not row.key:
            raise ValueError("Name the attribute (its key, such as plan).")
        return {"field": f"attributes.{row.key}", "op": row.op, "value": _attribute_value(row.op, row.value)}
    if row.field not in dict(FIELDS):
        raise ValueError("Pick a field from the list.")
    values = _split(row.value)
    return {"field": row.field, "op": row.op, "value": values if row.op == "in" else row.value}


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _attribute_value(op: str, text: str) -> object:
    if op in ("gte", "lte"):
        return _number(text)
    if op == "between":
        parts = _split(text)
        if len(parts) != 2:
            raise ValueError("Give two numbers, low and high, separated by a comma (3, 10).")
        return [_number(part) for part in parts]
    return [_scalar(part) for part in _split(text)] if op == "in" else _scalar(text)


def _number(text: str) -> int | float:
    if not _NUMBER.fullmatch(text):
        raise ValueError(f"{text!r} is not a number.")
    return json.loads(text)


def _scalar(text: str) -> str | int | float:
    """A JSON number as a number; ``"7"`` (quoted) or any other text as a string."""
    if _NUMBER.fullmatch(text):
        return json.loads(text)
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return text
