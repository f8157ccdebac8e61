"""What a campaign's name, params and wall time must be, for every way in (the composer and the API).

The composer (``frontend/campaigns/composer.py``) and ``POST /api/v1/campaigns``
(``campaigns/serializers.py``) both call these, so the API cannot accept what a
marketer's form refuses. Each function returns the problem as a sentence, or None.
"""

from datetime import time
from typing import Any

from backend.notifications.rendering import BIDI_CONTROLS
from campaigns.models import Campaign, Segment

# actions.py names derived segments and drafts "<name> (list)", "(remainder)", "(correction)" in 200-character
# columns: a name leaves room for the longest suffix, else saving the derived segment is a database error.
LONGEST_DERIVED_SUFFIX = " (correction)"
MAX_NAME = min(Campaign._meta.get_field("name").max_length, Segment._meta.get_field("name").max_length) - len(
    LONGEST_DERIVED_SUFFIX
)
WALL_TIME_WITH_OFFSET = "Give a wall time without a UTC offset, e.g. 09:00: each recipient's own zone applies."


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a campaign: empty, over ``MAX_NAME`` characters, a direction control, unprintable."""
    if not name:
        return "Give the campaign a name."
    # One reverses the text after it wherever the name is shown, the derived segment "… (list)" and the PDF too.
    if BIDI_CONTROLS.intersection(name):
        return "A name cannot hold direction controls (U+202A–U+202E, U+2066–U+2069): they reverse the text shown."
    if len(name) > MAX_NAME or not name.isprintable():
        return f"A name is up to {MAX_NAME} printable characters."
    return None


def is_list_param(spec: dict[str, Any]) -> bool:
    """A kind declares a list param by giving a list as its example (``Kind.params``)."""
    return isinstance(spec.get("example"), list)


def param_problem(name: str, spec: dict[str, Any], value: Any) -> str | None:
    """Why ``value`` cannot be the declared param ``name``: each text (each item of a list param) within ``max_length``.

    A list param takes a list of texts; any other param a text or a number. ``spec`` is the
    kind's declaration, e.g. ``{"example": "20", "max_length": 3}``.
    """
    if is_list_param(spec):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            return f"{name} is a list of texts."
        items = value
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        items = [str(value)]
    else:
        return f"{name} is a text."
    limit = spec.get("max_length")
    if limit and any(len(item) > limit for item in items):
        return f"{name} is at most {limit} characters."
    return None


def params_problems(declared: dict[str, dict[str, Any]], params: dict[str, Any]) -> dict[str, str]:
    """The problem of each declared param present in ``params`` (``declared`` is ``Kind.params``), by name."""
    problems = {}
    for name, spec in declared.items():
        problem = param_problem(name, spec, params[name]) if name in params else None
        if problem:
            problems[name] = problem
    return problems


def wall_time_problem(value: time) -> str | None:
    """Why ``value`` cannot be a local-time schedule: it carries a UTC offset, which would be dropped."""
    if value.tzinfo is not None:
        return WALL_TIME_WITH_OFFSET
    return None
