"""Sandboxed rendering of template versions with a notification's params.

Authors write ``{{ param }}`` and Jinja's simple filters; the sandbox
(``sandbox.BoundedSandbox``, Jinja's immutable sandbox bounded in memory and
time) refuses attribute tricks that reach Python objects, there is no loader (no ``include``/``import`` of files) and
nothing from settings is in the context. A missing param is an error, never an
empty hole in a message; ``{{ x|default("…") }}`` and ``{% if x %}`` mark a
param optional. Every missing param is named at once, not the first only.
"""

from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache

import bleach
from jinja2 import DictLoader, TemplateError, Undefined
from jinja2.utils import missing as _NOT_GIVEN

from backend.notifications import bidi, sandbox
from backend.notifications.locales import text_direction
from backend.notifications.models import Channel, Kind, TemplateVersion
from backend.notifications.sanitizer import sanitize_html

_missing: ContextVar[list[str]] = ContextVar("missing_params")
# How printed values are isolated in the part being rendered (bidi.py): None, ("text", dir) or ("html", dir).
_isolation: ContextVar[tuple[str, str] | None] = ContextVar("isolation", default=None)


class _RecordingUndefined(Undefined):
    """Records each missing param that is printed, iterated or computed with.

    Tests (``{% if x %}``) and ``default`` do not record: they are how an
    author marks a param optional.
    """

    def _fail_with_undefined_error(self, *args, **kwargs):
        # Only a top-level name is a missing param; a missing attribute of a
        # param, or one the sandbox refused, stays an error of its own.
        if self._undefined_obj is _NOT_GIVEN:
            _missing.get().append(self._undefined_name or "?")
        return super()._fail_with_undefined_error(*args, **kwargs)

    def __str__(self) -> str:
        if self._undefined_obj is not _NOT_GIVEN:
            self._fail_with_undefined_error()
        _missing.get().append(self._undefined_name or "?")
        return ""

    def __iter__(self):
        self.__str__()
        return iter(())


# Undefined binds its operators to the base method when the class is made;
# rebind them so arithmetic on a missing param is recorded too.
for _operator in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__",
    "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pos__", "__neg__", "__call__", "__getitem__",
    "__lt__", "__le__", "__gt__", "__ge__", "__int__", "__float__", "__complex__", "__pow__", "__rpow__",
):  # fmt: skip
    setattr(_RecordingUndefined, _operator, _RecordingUndefined._fail_with_undefined_error)

# An empty loader: {% include %} / {% import %} find nothing, rather than the file system.
# Both bounded in memory and time (sandbox.py).
_TEXT_ENV = sandbox.BoundedSandbox(
    undefined=_RecordingUndefined, autoescape=False, loader=DictLoader({}), finalize=lambda v: _finalize(v)
)
_HTML_ENV = sandbox.BoundedSandbox(
    undefined=_RecordingUndefined, autoescape=True, loader=DictLoader({}), finalize=lambda v: _finalize(v)
)


class RenderError(ValueError):
    """A template cannot be rendered with the given params.

    ``missing`` lists the params the template uses that were not supplied,
    sorted. ``caused_by_params`` is True when the caller's params are at fault
    (missing, or a list/object printed as text), False when the template is.
    """

    def __init__(self, message: str, missing: list[str] | None = None, caused_by_params: bool = False):
        super().__init__(message)
        self.missing = missing or []
        self.caused_by_params = caused_by_params or bool(self.missing)

    def __reduce__(self):
        # Whole across processes (the editor renders previews in a worker, frontend/editor/worker.py).
        return (RenderError, (str(self), self.missing, self.caused_by_params))


class _UnprintableParam(TemplateError):
    """A list or object param printed where text was expected."""


# The longest rendered part we hand to a provider, in characters: a loop in a
# template must not mail megabytes. Counted while the part is rendered.
MAX_RENDERED_CHARS = sandbox.MAX_CHARS

# Bidi embedding/override/isolate controls (Unicode TR #9 §2: U+202A–U+202E, U+2066–U+2069): in a param
# they can reverse the surrounding text, e.g. make a subject read backwards; in an id or a name, make one
# read as another. Params have them stripped; ids and campaign names refuse them.
BIDI_CONTROLS = frozenset(map(chr, [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]))
# The isolation marks (bidi.MARKS) are noncharacters: a param carrying them could unbalance the <bdi>s.
_STRIP_BIDI_CONTROLS = dict.fromkeys(map(ord, BIDI_CONTROLS | bidi.MARKS))


def _clean(value):
    """Params as templates see them: bidi controls stripped from text, nulls dropped (so they count as missing)."""
    if isinstance(value, str):
        return value.translate(_STRIP_BIDI_CONTROLS)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _finalize(value):
    """How a printed value reads: booleans as true/false; a list or object is an error, not its Python repr.

    In a part rendered with isolation (``_isolation``), the value is isolated as ``bidi`` says.
    Jinja also finalizes constants (``{{ "x" }}``) when it compiles, outside any render: those
    are the author's own text and stay as written.
    """
    if isinstance(value, bool):
        value = "true" if value else "false"
    if isinstance(value, dict | list):
        raise _UnprintableParam("a list or object param was printed as text; print its items instead")
    isolation = _isolation.get()
    if isolation is None or value is None:
        return value
    part, direction = isolation
    if part == "html":
        return bidi.mark_html(str(value))
    return bidi.isolate_text(str(value), direction)


@dataclass(frozen=True)
class Rendered:
    """A rendered message: ``html`` is a whole document, or "" when the version has none."""

    subject: str
    text: str
    html: str


@lru_cache(maxsize=1024)
def _compile(source: str, html: bool):
    try:
        return (_HTML_ENV if html else _TEXT_ENV).from_string(source)
    except TemplateError as exc:
        raise RenderError(f"template error: {exc}") from exc


def _render(
    source: str, params: dict, missing: list[str], html: bool = False, isolation: tuple[str, str] | None = None
) -> str:
    if not source:
        return ""
    template = _compile(source, html)
    token = _missing.set(missing)
    isolating = _isolation.set(isolation)
    try:
        output = sandbox.render(template, params, MAX_RENDERED_CHARS)
    except _UnprintableParam as exc:
        raise RenderError(str(exc), caused_by_params=True) from exc
    except sandbox.RenderBoundExceeded as exc:
        raise RenderError(f"template error: {exc}") from exc
    except Exception as exc:
        # The sandbox raises TemplateError, but author code can also overflow, divide by zero or recurse.
        if missing:
            return ""  # reported with the other missing params by render()
        raise RenderError(f"template error: {exc.__class__.__name__}: {exc}") from exc
    finally:
        _missing.reset(token)
        _isolation.reset(isolating)
    problem = message_text_problem(output)
    if problem:  # e.g. {{ '\ud83d' }} or {{ '\u202e' }}: a string escape can make what no keyboard types
        raise RenderError(f"template error: the rendered text is not valid: {problem}")
    return output


def text_problem(text: str) -> str:
    """Why ``text`` cannot be stored or sent ("" when it can): NUL characters or unpaired UTF-16 surrogates."""
    if "\x00" in text:
        return "Text may not contain NUL characters."
    try:
        text.encode()
    except UnicodeEncodeError:
        return "Text contains an unpaired surrogate (half an emoji): retype that character."
    return ""


# Unicode's directional overrides (UAX #9 §2.2): each shows the characters after it in reverse, "<U+202E>txt.exe" as
# "exe.txt"; isolates (U+2066–U+2069), marks and embeddings set a direction without reversing anything.
OVERRIDES = {"\u202d": "U+202D (left-to-right override)", "\u202e": "U+202E (right-to-left override)"}


def message_text_problem(text: str) -> str:
    """``text_problem``, and the bidi overrides: "" when ``text`` may be part of a message a person reads.

    An override can make a link's text read as another address; an isolate (U+2067 … U+2069) or
    ``<bdi>`` gives a run its direction without reversing it. Held to it: what an author types
    (a template's source), what the sanitizer makes of it (``&#x202E;`` becomes the character), each
    rendered part (``{{ "\\u202e" }}``, ``"%c"|format(8238)``). Params never carry one: ``_clean``
    strips every bidi control from them.
    """
    problem = text_problem(text)
    if problem:
        return problem
    found = [name for char, name in OVERRIDES.items() if char in text]
    if found:
        return (
            f"Text may not contain {' or '.join(found)}: it shows the characters after it reversed, which can "
            "disguise a link. Give a run its direction with an isolate (U+2067 … U+2069) or <bdi> instead."
        )
    return ""


def email_document(body_html: str, subject: str, language: str, direction: str) -> str:
    """Wrap a sanitized HTML body in a document whose ``<html>`` carries ``lang`` and ``dir``."""
    align = "right" if direction == "rtl" else "left"
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{bleach.clean(language)}" dir="{direction}">\n'
        '<head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{bleach.clean(subject)}</title></head>\n"
        f'<body dir="{direction}" style="font-family: Tahoma, Arial, sans-serif; text-align: {align};">\n'
        f"{body_html}\n"
        "</body>\n</html>\n"
    )


def select_version(kind: Kind, channel: Channel | str, language: str) -> TemplateVersion | None:
    """The newest approved version for ``language``, else for the kind's default language.

    Returns None when neither exists (the caller answers 422).
    """
    languages = list(dict.fromkeys([language, kind.default_language]))
    approved = TemplateVersion.objects.filter(
        kind=kind, channel=channel, status=TemplateVersion.Status.APPROVED, language__in=languages
    ).order_by("-version")
    newest: dict[str, TemplateVersion] = {}
    for version in approved:  # one query for both languages
        newest.setdefault(version.language, version)
    for lang in languages:
        if lang in newest:
            newest[lang].kind = kind  # its name is in the answer (str(version)): not read again
            return newest[lang]
    return None


def render(version: TemplateVersion, params: dict, document: bool = True) -> Rendered:
    """Render every part of ``version`` with ``params``.

    The email document's ``lang``/``dir`` follow the version's language (the
    recipient's own, unless the template fell back to the default language).
    Every value a template inserts is isolated (``bidi``): in the HTML of an RTL
    mail with ``<bdi>``, in an email's text part with U+2068…U+2069 where its
    direction differs from the message's; SMS, push and in-app text get nothing added.
    ``document`` False leaves ``html`` empty: the HTML body is still rendered (its params
    checked) but not sanitized and wrapped, which only a sent email needs.
    Raises ``RenderError`` for a missing param or a broken template.
    """
    params = _clean(params)
    missing: list[str] = []
    direction = text_direction(version.language)
    email = version.channel == Channel.EMAIL
    # A subject is one header line: newlines in it would be a header injection (and Django refuses them).
    subject = " ".join(_render(version.subject, params, missing).split())
    text = _render(version.text_body, params, missing, isolation=("text", direction) if email else None)
    html_isolation = ("html", direction) if direction == "rtl" else None
    body = _render(version.html_body, params, missing, html=True, isolation=html_isolation)
    if missing:
        names = sorted(set(missing))
        raise RenderError("missing params: " + ", ".join(names), names)
    html = ""
    if version.html_body and document:
        html = email_document(email_body(body, direction), subject, version.language, direction)
    return Rendered(subject=subject, text=text, html=html)


def example_params(kind: Kind) -> dict:
    """Each param ``kind`` declares, with its example (its own name when the kind gives none)."""
    return {name: spec.get("example", name) for name, spec in kind.params.items()}


def required_params(version: TemplateVersion) -> list[str]:
    """The params a send of ``version`` must carry, sorted: those it uses without a ``default``.

    Rendered with none at all, every param printed, iterated or computed with is reported missing
    (see ``RenderError``); a param only tested (``{% if x %}``) or given a ``default`` is optional.
    Rendered again with the kind's declared params (``example_params``), a param used in a branch they
    take is required too: ``{% if order %}{{ tracking_url }}{% endif %}`` needs ``tracking_url`` from
    every caller that sends ``order``. A version that fails for another reason (a broken template)
    requires nothing that this can tell.
    """
    missing: set[str] = set()
    for params in ({}, example_params(version.kind) if version.kind_id else {}):
        try:
            render(version, params, document=False)
        except RenderError as exc:
            missing.update(exc.missing)
    return sorted(missing)


def email_body(rendered_html: str, direction: str) -> str:
    """A rendered HTML body made mail-ready: values isolated, sanitized, blocks given ``dir`` in RTL mail."""
    body = sanitize_html(bidi.place_isolates(rendered_html))
    return bidi.with_block_direction(body, direction) if direction == "rtl" else body
