"""A strict JSON parser: what a lenient one would silently guess at is refused with a 400.

Refused: duplicate keys (which value did the caller mean?), numbers that
overflow to infinity (``1e400``), NaN/Infinity literals (not JSON, RFC 8259
§6), text that PostgreSQL or UTF-8 cannot hold (NUL, unpaired surrogates;
a 422 naming the field, in keys too, wherever in the body it is), and
documents nested deeper than ``MAX_DEPTH`` levels: whether the
parser's recursion gives out first depends on how deep the call stack already
is, so the limit is a fixed number, the same whatever called the parser.
"""

import json

from django.conf import settings
from django.http import QueryDict
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.parsers import JSONParser

# Levels of objects and lists in one request body; far above any real request.
MAX_DEPTH = 64
MAX_DEPTH_MESSAGE = f"JSON may nest at most {MAX_DEPTH} levels deep."


def nesting_depth(value: object) -> int:
    """How deeply lists and objects nest in a parsed JSON value (a scalar: 0), counted without recursion.

    JSON that parses can still be too deep for the code that walks it later
    (recursive checks, rendering, the response's encoder): callers bound it.
    """
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            deepest = max(deepest, depth)
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def text_problem_at(value: object, path: str) -> tuple[str, str] | None:
    """``(path, problem)`` of the first string in ``value`` (keys too) that PostgreSQL or UTF-8 would refuse.

    PostgreSQL's text and jsonb cannot hold NUL (U+0000); an unpaired UTF-16 surrogate has no UTF-8
    form. A key's problem is reported at the path of the object holding it. Walks without recursion.
    """
    stack: list[tuple[object, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return where, "text may not contain NUL characters."
            try:
                item.encode()
            except UnicodeEncodeError:
                return where, "text contains an unpaired surrogate (invalid UTF-16)."
        elif isinstance(item, dict):
            children = [(key, where) for key in item] + [(v, f"{where}.{k}" if where else k) for k, v in item.items()]
            stack.extend(reversed(children))
        elif isinstance(item, list):
            stack.extend(reversed([(child, f"{where}.{index}") for index, child in enumerate(item)]))
    return None


def text_refusal(where: str, message: str) -> dict[str, list[str]]:
    """``text_problem_at``'s finding as field errors: under its top-level field, the path named when it is deeper.

    ``{"params": ["params.order: text may not contain NUL characters."]}``, but
    ``{"idempotency_key": ["text may not contain NUL characters."]}``: the answer's message puts the
    field before its errors, and a path equal to the field would read twice.
    """
    field = where.split(".", 1)[0] or "body"
    return {field: [f"{where}: {message}" if where and where != field else message]}


def single_valued(params: QueryDict) -> dict[str, str]:
    """A query string as one value per name; ``ValidationError`` (422) naming each name given more than once.

    ``?user_id=a&user_id=b`` would otherwise be read as ``b`` alone: which one did the caller mean?
    """
    repeated = {
        name: [f"Given {len(values)} times; give it once."] for name, values in params.lists() if len(values) > 1
    }
    if repeated:
        raise ValidationError(repeated)
    return params.dict()


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise ParseError(f"JSON object has the key {key!r} twice.")
        seen[key] = value
    return seen


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ParseError(f"The number {text[:40]} is too large.")
    return value


def _no_constants(name: str):
    raise ParseError(f"{name} is not valid JSON.")


class StrictJSONParser(JSONParser):
    """DRF's JSON parser with the refusals above.

    ``check_text`` False leaves the text refusals (NUL, surrogates) to the view: the batch endpoint
    refuses one item for them, not the whole batch.
    """

    check_text = True

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = stream.read().decode(encoding)
        except UnicodeDecodeError:
            raise ParseError(f"The body is not valid {encoding}.") from None
        try:
            value = json.loads(
                text, object_pairs_hook=_no_duplicates, parse_float=_finite, parse_constant=_no_constants
            )
        except RecursionError:
            raise ParseError(MAX_DEPTH_MESSAGE) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if nesting_depth(value) > MAX_DEPTH:
            raise ParseError(MAX_DEPTH_MESSAGE)
        problem = text_problem_at(value, "") if self.check_text else None
        if problem:
            raise ValidationError(text_refusal(*problem))
        return value


class BatchJSONParser(StrictJSONParser):
    """``StrictJSONParser`` whose text refusals are the view's, item by item (``text_problem_at``)."""

    check_text = False


def json_object(request) -> dict:
    """The request's parsed body when it is a JSON object; ``ParseError`` (400) for a list, string or number."""
    if not isinstance(request.data, dict):
        raise ParseError("The body must be a JSON object.")
    return request.data
