"""Sandboxed rendering of template versions with a notification's params.

Authors write ``{{ param }}`` and Jinja's simple filters; the sandbox
(``jinja2.sandbox.SandboxedEnvironment``) refuses attribute tricks that reach
Python objects, there is no loader (no ``include``/``import`` of files) and
nothing from settings is in the context. A missing param is an error, never an
empty hole in a message: ``StrictUndefined`` plus an up-front check that names
every missing param at once.
"""

from dataclasses import dataclass
from functools import lru_cache

import bleach
from jinja2 import StrictUndefined, TemplateError, meta
from jinja2.sandbox import SandboxedEnvironment

from backend.notifications.models import Channel, Kind, TemplateVersion
from backend.notifications.models.recipient import text_direction

_TEXT_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_HTML_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=True)

# Author HTML allow-list. ``dir`` and ``lang`` must survive: a sanitizer that
# drops ``dir`` silently turns Arabic paragraphs left-to-right.
_ALLOWED_TAGS = frozenset(
    {
        "a",
        "b",
        "bdi",
        "bdo",
        "blockquote",
        "br",
        "code",
        "div",
        "em",
        "h1",
        "h2",
        "h3",
        "h4",
        "hr",
        "i",
        "li",
        "ol",
        "p",
        "pre",
        "small",
        "span",
        "strong",
        "table",
        "tbody",
        "td",
        "th",
        "thead",
        "tr",
        "u",
        "ul",
    }
)
_ALLOWED_ATTRIBUTES = {
    "*": ["dir", "lang", "title"],
    "a": ["href", "title", "dir", "lang"],
    "td": ["colspan", "rowspan", "dir", "lang"],
    "th": ["colspan", "rowspan", "dir", "lang"],
}
_ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})


class RenderError(ValueError):
    """A template cannot be rendered with the given params.

    ``missing`` lists the params the template uses that were not supplied,
    sorted; it is empty for syntax errors and other template faults.
    """

    def __init__(self, message: str, missing: list[str] | None = None):
        super().__init__(message)
        self.missing = missing or []


@dataclass(frozen=True)
class Rendered:
    """A rendered message: ``html`` is a whole document, or "" when the version has none."""

    subject: str
    text: str
    html: str


@lru_cache(maxsize=1024)
def _compile(source: str, html: bool):
    env = _HTML_ENV if html else _TEXT_ENV
    try:
        return env.from_string(source), frozenset(meta.find_undeclared_variables(env.parse(source)))
    except TemplateError as exc:
        raise RenderError(f"template error: {exc}") from exc


def _render(source: str, params: dict, html: bool = False) -> str:
    if not source:
        return ""
    template, names = _compile(source, html)
    missing = sorted(names - params.keys())
    if missing:
        raise RenderError("missing params: " + ", ".join(missing), missing)
    try:
        return template.render(params)
    except TemplateError as exc:
        raise RenderError(f"template error: {exc}") from exc


def sanitize_html(html: str) -> str:
    """Strip author HTML down to the allow-list (bleach), keeping ``dir`` and ``lang``."""
    return bleach.clean(
        html,
        tags=_ALLOWED_TAGS,
        attributes=_ALLOWED_ATTRIBUTES,
        protocols=_ALLOWED_PROTOCOLS,
        strip=True,
    )


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


def check_params(version: TemplateVersion, params: dict) -> None:
    """Raise ``RenderError`` naming every param the version needs that ``params`` lacks."""
    missing: set[str] = set()
    for source, html in ((version.subject, False), (version.text_body, False), (version.html_body, True)):
        if source:
            missing |= _compile(source, html)[1] - params.keys()
    if missing:
        names = sorted(missing)
        raise RenderError("missing params: " + ", ".join(names), names)


def select_version(kind: Kind, channel: Channel | str, language: str) -> TemplateVersion | None:
    """The newest approved version for ``language``, else for the kind's default language.

    Returns None when neither exists (the caller answers 422).
    """
    approved = TemplateVersion.objects.filter(
        kind=kind, channel=channel, status=TemplateVersion.Status.APPROVED
    ).order_by("-version")
    for lang in dict.fromkeys([language, kind.default_language]):
        version = approved.filter(language=lang).first()
        if version is not None:
            return version
    return None


def render(version: TemplateVersion, params: dict) -> Rendered:
    """Render every part of ``version`` with ``params``.

    The email document's ``lang``/``dir`` follow the version's language (the
    recipient's own, unless the template fell back to the default language).
    Raises ``RenderError`` for a missing param or a broken template.
    """
    check_params(version, params)
    subject = _render(version.subject, params).strip()
    text = _render(version.text_body, params)
    html = ""
    if version.html_body:
        body = sanitize_html(_render(version.html_body, params, html=True))
        html = email_document(body, subject, version.language, text_direction(version.language))
    return Rendered(subject=subject, text=text, html=html)
