"""The Jinja sandbox every template render runs in, bounded in memory and time.

Jinja's sandbox keeps templates away from Python's internals, not from
exhausting the process: outside testing found that ``{{ 'A' * 10**9 }}`` in an
editor preview took daphne to ~4 GB for ~12 s, and nested ``range`` loops would
hold it for minutes. Here each render has a ``Budget`` and every way a template
makes work is checked, where the size can be known before the work is done:

* ``*``, ``**``, ``+`` and ``%`` (Jinja's ``intercepted_binops``) and ``~``
  (rewritten into a checked join): a string, list or tuple longer than
  ``MAX_CHARS``, or an integer of more than ``MAX_INT_BITS`` bits, is refused;
* ``range()`` longer than ``MAX_RANGE`` is refused; ``lipsum`` is not offered;
* every loop iteration and every call (a macro, a method) is a step: at most
  ``MAX_STEPS`` per render, and none once ``MAX_SECONDS`` have passed;
  recursive loops are refused when the template is compiled;
* methods and filters that repeat text by a number or a string they are given
  (``center``, ``ljust``, ``indent``, ``replace``, ``join``, ``format`` …) are
  checked from their arguments; the result of any call or filter is checked;
* a format (``str.format``, ``%``) may not print its values past ``MAX_CHARS``
  (``('{0}' * 30000).format(big)``), and a list or dict may not print as more than
  ``MAX_BUILT_CHARS`` (``[big] * 100000`` is 100,000 items and 10**10 characters);
* everything printed or built, summed over the render, at most ``MAX_BUILT_CHARS``
  (a 100,000-character value printed in a loop into a ``{% set %}`` block);
* lists and dicts cannot be changed in place (``ImmutableSandboxedEnvironment``),
  so no ``l.extend(l)`` doubling a list at each step.

``render`` streams the output and stops at the caller's cap. Anything over a
bound raises ``RenderBoundExceeded`` (a ``TemplateError``) naming the bound.
"""

import re
import time
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from string import Formatter
from typing import Any

from jinja2 import TemplateError, TemplateSyntaxError, nodes, pass_eval_context
from jinja2.runtime import markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

# The longest string, list or tuple a template may build, and the longest output part, in characters.
MAX_CHARS = 100_000
# The largest integer a template may compute: 4,096 bits is about 1,233 decimal digits.
MAX_INT_BITS = 4096
# The longest range() a template may make.
MAX_RANGE = 10_000
# Loop iterations and calls of one render, together.
MAX_STEPS = 50_000
# Characters printed or built by one render, summed (each value is at most MAX_CHARS).
MAX_BUILT_CHARS = 5_000_000
# Seconds one render may take; checked at every step.
MAX_SECONDS = 1.0

_COUNTED = "_counted_loop"
_CONCAT = "_checked_concat"
_clock = time.monotonic


class RenderBoundExceeded(TemplateError):
    """A render went over one of the bounds above; the message says which."""


@dataclass
class Budget:
    """What one render has spent so far, and when it must stop (a ``time.monotonic()`` instant)."""

    deadline: float
    steps: int = 0
    built: int = 0


_budget: ContextVar[Budget] = ContextVar("render_budget")


def _current() -> Budget:
    # Outside a render (Jinja folding constants while compiling) there is no
    # budget: raising makes Jinja leave the expression to run time, under one.
    try:
        return _budget.get()
    except LookupError:
        raise RenderBoundExceeded("not inside a bounded render") from None


def _step() -> None:
    budget = _current()
    budget.steps += 1
    if budget.steps > MAX_STEPS:
        raise RenderBoundExceeded(f"the template runs more than {MAX_STEPS:,} loop iterations and calls")
    if _clock() > budget.deadline:
        raise RenderBoundExceeded(f"the template took longer than {MAX_SECONDS:g} s")


def _too_long(length: int, what: str = "the template") -> None:
    if length > MAX_CHARS:
        raise RenderBoundExceeded(f"{what} would make {length:,} characters or items, over {MAX_CHARS:,}")


_CONTAINERS = list | tuple | dict | set | frozenset


def _text_size(value: Any, limit: int = MAX_BUILT_CHARS) -> int:
    """About how many characters ``value`` prints as (``str()``, ``tojson``, ``%s``), counted up to just past ``limit``.

    A list of 100,000 references to one 100,000-character string is short in items and
    10**10 characters as text: its items are counted, each at least 2 (the ", " between them).
    """
    if isinstance(value, str | bytes):
        return len(value)
    if not isinstance(value, _CONTAINERS):
        return len(str(value)) if isinstance(value, int | float) else 8
    size = 2
    for item in value.items() if isinstance(value, dict) else value:
        size += 2 + _text_size(item, limit - size)
        if size > limit:
            break
    return size


def _built(value: Any) -> Any:
    """``value`` after charging its length to the budget; refused when it is too long."""
    if isinstance(value, str | bytes | _CONTAINERS):
        _too_long(len(value))
        if isinstance(value, _CONTAINERS) and _text_size(value) > MAX_BUILT_CHARS:
            raise RenderBoundExceeded(
                f"the template makes a list or object of more than {MAX_BUILT_CHARS:,} characters"
            )
        budget = _current()
        budget.built += len(value)
        if budget.built > MAX_BUILT_CHARS:
            raise RenderBoundExceeded(f"the template builds more than {MAX_BUILT_CHARS:,} characters in all")
    elif isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise RenderBoundExceeded(f"the template makes a number of more than {MAX_INT_BITS:,} bits")
    return value


def _sized(value: Any) -> bool:
    return isinstance(value, str | list | tuple)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_mul(left: Any, right: Any) -> None:
    if _is_int(left) and _is_int(right):
        if left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise RenderBoundExceeded(f"the template makes a number of more than {MAX_INT_BITS:,} bits")
    elif _sized(left) and isinstance(right, int):
        _too_long(len(left) * right, "a repetition with *")
    elif isinstance(left, int) and _sized(right):
        _too_long(len(right) * left, "a repetition with *")


def _check_pow(base: Any, exponent: Any) -> None:
    growing = _is_int(base) and _is_int(exponent) and exponent > 0 and abs(base) > 1
    if growing and (abs(base).bit_length() - 1) * exponent > MAX_INT_BITS:
        raise RenderBoundExceeded(f"the template makes a number of more than {MAX_INT_BITS:,} bits")


def _check_add(left: Any, right: Any) -> None:
    if _sized(left) and _sized(right):
        _too_long(len(left) + len(right), "a concatenation with +")


# printf-style conversion specs (Python's "printf-style String Formatting"): flags, width, precision.
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _width_numbers(value: Any) -> list[int]:
    """The widths an argument may give a computed spec: an int, or each run of digits in a string's or float's text.

    ``'{:{}}'.format('a', '1000000000')`` pads to 10**9: ``str.format`` puts the argument's text in the spec.
    A run longer than 16 digits is cut to its first 16, still far over ``MAX_CHARS``.
    """
    if _is_int(value):
        return [value]
    if isinstance(value, str | float):
        return [int(digits.lstrip("0")[:16] or "0") for digits in re.findall(r"\d+", str(value))]
    return []


def _check_widths(widths: Iterable[str], starred: Iterable[Any]) -> int:
    """The largest format width or precision of one field (0 for none); refused over ``MAX_CHARS``.

    Written out (``{:>80}``) or taken from the arguments (``{:{w}}``, ``%*d``).
    """
    largest = 0
    for width in widths:
        numbers = [int(width)] if width.isdigit() else [n for v in starred for n in _width_numbers(v)] if width else []
        for number in numbers:
            _too_long(number, "a format width")
            largest = max(largest, number)
    return largest


def _check_percent(template: Any, values: Any) -> None:
    if not isinstance(template, str):
        return
    starred = values if isinstance(values, tuple) else (values,)
    widths = [
        _check_widths([spec.group(1) or "", spec.group(2) or ""], starred) for spec in _PERCENT_SPEC.finditer(template)
    ]
    _check_repeats(template, widths, tuple(values.values()) if isinstance(values, dict) else starred)


def _check_repeats(template: str, widths: list[int], values: tuple) -> None:
    """Refuse a format whose fields (each its width, or the longest value) would print over ``MAX_CHARS``.

    ``('{0}' * 9000).format(big)`` and ``'{0:99999}' * 900`` are each a short template and one call.
    """
    longest = max((_text_size(value, MAX_CHARS) for value in values), default=0)
    _too_long(len(template) + sum(max(width, longest) for width in widths), "a format")


def _check_str_format(template: str, args: tuple, kwargs: dict) -> None:
    """Widths of ``str.format``: digits in a spec, or any number argument when a spec is computed (``{:{w}}``)."""
    values = (*args, *kwargs.values())
    widths = []
    for _, field, spec, _ in Formatter().parse(template):
        if field is not None:
            digits = re.findall(r"\d+", spec or "") + (["*"] if "{" in (spec or "") else [])
            widths.append(_check_widths(digits, values))
    _check_repeats(template, widths, values)


_BINOP_CHECKS: dict[str, Callable[[Any, Any], None]] = {
    "*": _check_mul,
    "**": _check_pow,
    "+": _check_add,
    "%": _check_percent,
}


def _lengths(items: Iterable[Any]) -> int:
    return sum(len(item) if _sized(item) else 1 for item in items)


def _check_replace(text: Any, old: Any, new: Any, count: Any = None) -> None:
    if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
        times = text.count(old) if count is None or count < 0 else min(count, text.count(old))
        _too_long(len(text) + times * max(len(new) - len(old), 0), "a replace")


def _check_join(separator: Any, items: list) -> None:
    if isinstance(separator, str):
        _too_long(len(separator) * max(len(items) - 1, 0) + _lengths(items), "a join")


def _check_width(text: Any, width: Any, *_: Any) -> None:
    if _is_int(width):
        _too_long(width, "a padding width")


def _check_expandtabs(text: Any, tabsize: Any = 8) -> None:
    if isinstance(text, str) and _is_int(tabsize):
        _too_long(len(text) + text.count("\t") * tabsize, "expandtabs")


def _check_translate(text: Any, table: Any) -> None:
    if isinstance(text, str) and isinstance(table, dict):
        longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
        _too_long(len(text) * longest, "a translate")


_STR_METHOD_CHECKS: dict[str, Callable[..., None]] = {
    "ljust": _check_width,
    "rjust": _check_width,
    "center": _check_width,
    "zfill": _check_width,
    "expandtabs": _check_expandtabs,
    "replace": _check_replace,
    "translate": _check_translate,
}


def _checked_method_args(method: Any, args: tuple) -> tuple:
    """``args`` for a str method, after refusing what would be too long (``join``'s iterable made a list)."""
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, str):
        return args
    name = getattr(method, "__name__", "")
    if name == "join" and args:
        items = list(args[0])
        _check_join(owner, items)
        return (items, *args[1:])
    if name in _STR_METHOD_CHECKS:
        _STR_METHOD_CHECKS[name](owner, *args)
    return args


# --- filters: (value, *args, **kwargs) after Jinja's pass_* argument; a check may return the value to use ---------


def _filter_join(value: Any, d: Any = "", attribute: Any = None) -> list:
    items = list(value)
    if attribute is None:
        _check_join(d, items)
    else:
        _too_long(len(d) * len(items) if isinstance(d, str) else 0, "a join")
    return items


def _filter_replace(value: Any, old: Any = "", new: Any = "", count: Any = None) -> None:
    _check_replace(str(value), str(old), str(new), count)


def _filter_indent(value: Any, width: Any = 4, *_: Any) -> None:
    pad = width if _is_int(width) else len(str(width))
    _too_long(len(str(value)) + (str(value).count("\n") + 1) * pad, "an indent")


def _filter_wordwrap(value: Any, width: Any = 79, break_long_words: Any = True, wrapstring: Any = None, *_) -> None:
    if isinstance(wrapstring, str):
        _too_long(len(str(value)) * (len(wrapstring) + 1), "a wordwrap")


def _filter_format(value: Any, *args: Any, **kwargs: Any) -> None:
    _check_percent(str(value), kwargs or args)


def _filter_count(value: Any, count: Any = 0, *_: Any) -> None:
    if _is_int(count):
        _too_long(count, "a batch or slice count")


def _filter_sum(value: Any, attribute: Any = None, start: Any = 0) -> list:
    items = list(value)
    if attribute is None:
        _too_long(_lengths(items) + (len(start) if _sized(start) else 0), "a sum")
    return items


def _filter_tojson(value: Any, indent: Any = None) -> None:
    if _is_int(indent) and indent > 16:
        raise RenderBoundExceeded("tojson takes an indent of at most 16")


_FILTER_CHECKS: dict[str, Callable[..., list | None]] = {
    "center": _check_width,
    "join": _filter_join,
    "replace": _filter_replace,
    "indent": _filter_indent,
    "wordwrap": _filter_wordwrap,
    "format": _filter_format,
    "batch": _filter_count,
    "slice": _filter_count,
    "sum": _filter_sum,
    "tojson": _filter_tojson,
}


def _bounded_filter(name: str, func: Callable) -> Callable:
    """``func`` with its check (when it has one) before it runs, and its result charged to the budget."""
    check = _FILTER_CHECKS.get(name)
    skip = 1 if getattr(func, "jinja_pass_arg", None) else 0  # the context/eval context/environment Jinja passes

    @wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if check is not None:
            value = check(*args[skip:], **kwargs)  # an iterable it had to read is passed on as a list
            if value is not None:
                args = (*args[:skip], value, *args[skip + 1 :])
        return _built(func(*args, **kwargs))

    return bounded


def _counted(iterable: Iterable[Any]) -> Iterator[Any]:
    """A loop's items, each one a step."""
    for item in iterable:
        _step()
        yield item


@pass_eval_context
def _concat(eval_ctx: Any, pieces: list) -> str:
    """``a ~ b``: Jinja's own join, refused when the result would be too long."""
    texts = [piece if isinstance(piece, str) else str(piece) for piece in pieces]
    _too_long(sum(map(len, texts)), "a concatenation with ~")
    return _built((markup_join if eval_ctx.autoescape else str_join)(pieces))


def bounded_range(*args: int) -> range:
    """``range()`` of at most ``MAX_RANGE`` numbers."""
    numbers = range(*args)
    try:
        length = len(numbers)
    except OverflowError:  # more numbers than sys.maxsize
        length = MAX_RANGE + 1
    if length > MAX_RANGE:
        raise RenderBoundExceeded(f"range() of {MAX_RANGE:,} numbers at most")
    return numbers


class _Bounder(NodeTransformer):
    """Counts loop iterations, checks ``~``; refuses recursive loops (``loop()`` calls would escape the count)."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        if node.recursive:
            raise TemplateSyntaxError("recursive loops are not allowed in templates", node.lineno)
        node = self.generic_visit(node)
        node.iter = nodes.Filter(node.iter, _COUNTED, [], [], None, None, lineno=node.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        node = self.generic_visit(node)
        pieces = nodes.List(node.nodes, lineno=node.lineno)
        return nodes.Filter(pieces, _CONCAT, [], [], None, None, lineno=node.lineno)


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox with the bounds of this module; ``render`` is how to run its templates."""

    intercepted_binops = frozenset(_BINOP_CHECKS)

    def __init__(self, *, finalize: Callable[[Any], Any] | None = None, **options: Any) -> None:
        inner = finalize or (lambda value: value)
        super().__init__(finalize=lambda value: _built(inner(value)), **options)
        self.globals = {name: value for name, value in self.globals.items() if name != "lipsum"}
        self.globals["range"] = bounded_range
        self.filters = {name: _bounded_filter(name, func) for name, func in self.filters.items()}
        self.filters[_COUNTED] = _counted
        self.filters[_CONCAT] = _concat

    def make_globals(self, d: MutableMapping[str, Any] | None) -> dict[str, Any]:
        """A template's globals as one plain dict: the environment's, overlaid with ``d``.

        Jinja's own is a ``ChainMap`` over both, which every render iterates twice to build its
        context (``runtime.new_context`` copies it, ``Context`` takes its keys): 12 of the 17 µs a
        one-line template took to render. A copy holds the same names because this environment's
        globals are set once, in ``__init__``, before any template is compiled.
        """
        return {**self.globals, **(d or {})}

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        return _Bounder().visit(super()._parse(source, name, filename))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _BINOP_CHECKS[operator](left, right)
        return _built(super().call_binop(context, operator, left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _step()
        args = _checked_method_args(__obj, args)
        return _built(super().call(__context, __obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None
        template, is_map = value.__self__, value.__name__ == "format_map"

        def checked(*args: Any, **kwargs: Any) -> str:
            _check_str_format(template, () if is_map else args, args[0] if is_map and args else kwargs)
            return wrapper(*args, **kwargs)

        return checked


def render(template: Any, params: dict, max_output: int) -> str:
    """``template`` (from a ``BoundedSandbox``) rendered with ``params`` under a fresh ``Budget``.

    The output is counted as it is produced and the render stops as soon as it
    passes ``max_output`` characters. Raises ``RenderBoundExceeded`` for any
    bound, and whatever the template itself raises.
    """
    token = _budget.set(Budget(deadline=_clock() + MAX_SECONDS))
    try:
        chunks: list[str] = []
        size = 0
        for chunk in template.generate(params):
            size += len(chunk)
            if size > max_output:
                raise RenderBoundExceeded(f"the rendered text has more than {max_output:,} characters")
            chunks.append(chunk)
        return "".join(chunks)
    finally:
        _budget.reset(token)
