"""Author HTML cut down to what is safe in a mail and in the editor's preview: nh3, then bleach.

Two well-kept sanitizers, each for what it does by design:

1. **nh3** (ammonia) parses as a browser does and drops the elements whose content is not
   text *with* their content (``<script>alert(1)</script>`` leaves nothing, not "alert(1)");
   it decodes character references (decimal, zero-padded, hex) and drops tabs and newlines
   before it judges a URL's scheme, as browsers do (WHATWG URL Standard, "remove all ASCII tab
   or newline"), so ``&#0000106avascript:`` and ``java&#x09;script:`` go.
2. **bleach** (the required package) runs second on nh3's output, with the same allow-list
   and its CSS sanitizer: inline ``style`` keeps only the properties of ``CSS_PROPERTIES``.

``<style>`` blocks go with their content (mail clients strip them unevenly; builders inline
their CSS for that reason); inline ``style`` stays within the allow-list; ``<img>`` keeps an
http(s) ``src`` only. ``dir`` and ``lang`` survive everywhere: a sanitizer that drops ``dir``
silently turns Arabic paragraphs left to right. ``<bdo>`` goes (its text stays): it reverses
the characters inside it, so ``<bdo dir="rtl">moc.knab-ruoy</bdo>`` reads "your-bank.com" on a link to
elsewhere; ``<bdi>`` isolates without reversing. The override characters themselves (U+202D,
U+202E) are refused in the template's source, in what this makes of it, and in every rendered
part (``rendering.message_text_problem``).
"""

import re

import bleach
import nh3
from bleach.css_sanitizer import CSSSanitizer

ALLOWED_TAGS = frozenset(
    {
        "a", "b", "bdi", "blockquote", "br", "caption", "center", "code", "div", "em", "h1", "h2", "h3", "h4",
        "hr", "i", "img", "li", "ol", "p", "pre", "s", "small", "span", "strong", "sub", "sup", "table", "tbody",
        "td", "tfoot", "th", "thead", "tr", "u", "ul",
    }
)  # fmt: skip
# Elements removed together with everything inside them: their content is code, a document or
# markup for another parser, never text a reader should see.
CONTENT_DROPPED = frozenset(
    {
        "script", "style", "template", "noscript", "iframe", "object", "embed", "frame", "frameset", "noframes",
        "noembed", "xmp", "svg", "math", "textarea", "select", "title", "head",
    }
)  # fmt: skip
_GLOBAL_ATTRIBUTES = frozenset({"dir", "lang", "title", "style", "align"})
_CELL_ATTRIBUTES = frozenset({"colspan", "rowspan", "width", "height", "valign", "bgcolor"})
ALLOWED_ATTRIBUTES: dict[str, frozenset[str]] = {
    "*": _GLOBAL_ATTRIBUTES,
    "a": frozenset({"href"}),
    "img": frozenset({"src", "alt", "width", "height", "border"}),
    "table": frozenset({"width", "cellpadding", "cellspacing", "border", "bgcolor", "role"}),
    "td": _CELL_ATTRIBUTES,
    "th": _CELL_ATTRIBUTES,
    "tr": frozenset({"valign", "bgcolor"}),
}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})
# What email builders put in inline styles and mail clients honour. Not: position (overlays a
# fake login over the mail), background/background-image (url() loads from anywhere),
# unicode-bidi (with direction, reverses text as U+202E does), behavior/expression (old IE script).
CSS_PROPERTIES = frozenset(
    {
        "background-color", "border", "border-bottom", "border-collapse", "border-color", "border-left",
        "border-radius", "border-right", "border-spacing", "border-style", "border-top", "border-width", "color",
        "direction", "display", "font", "font-family", "font-size", "font-style", "font-weight", "height",
        "letter-spacing", "line-height", "margin", "margin-bottom", "margin-left", "margin-right", "margin-top",
        "max-width", "min-width", "padding", "padding-bottom", "padding-left", "padding-right", "padding-top",
        "text-align", "text-decoration", "text-transform", "vertical-align", "white-space", "width", "word-break",
    }
)  # fmt: skip
_CSS = CSSSanitizer(allowed_css_properties=CSS_PROPERTIES)
# An <img> whose source was refused shows nothing but a broken-image box: it goes.
_IMAGE_WITHOUT_SOURCE = re.compile(r"<img(?![^>]*\ssrc=)[^>]*>")


# Script-bearing schemes, refused in every attribute, not only in the URL ones nh3 knows.
_SCRIPT_SCHEMES = ("javascript:", "vbscript:", "livescript:", "data:")
_IGNORED_IN_SCHEMES = re.compile(r"[\x00-\x20]")  # browsers drop tabs and newlines, and trim controls and spaces


def _attribute_filter(element: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter (``value`` already decoded): None drops the attribute.

    An image loads over http(s) only (no ``data:``, no relative path in a mail); a value that reads
    as a script URL once tabs, newlines and controls are dropped goes from any attribute.
    """
    if _IGNORED_IN_SCHEMES.sub("", value).lower().startswith(_SCRIPT_SCHEMES):
        return None
    if element == "img" and attribute == "src" and not value.lower().startswith(("https://", "http://")):
        return None
    return value


def sanitize_html(html: str) -> str:
    """``html`` cut down to the allow-list: first nh3, then bleach with the CSS allow-list (module docstring).

    Everything outside the lists is removed, never escaped into visible text. Pure; no errors.
    """
    cleaned = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        clean_content_tags=set(CONTENT_DROPPED),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_attribute_filter,
        url_schemes=set(ALLOWED_PROTOCOLS),
        link_rel=None,
        strip_comments=True,
    )
    cleaned = bleach.clean(
        cleaned,
        tags=ALLOWED_TAGS,
        attributes={tag: sorted(names | _GLOBAL_ATTRIBUTES) for tag, names in ALLOWED_ATTRIBUTES.items()},
        protocols=ALLOWED_PROTOCOLS,
        css_sanitizer=_CSS,
        strip=True,
        strip_comments=True,
    )
    return _IMAGE_WITHOUT_SOURCE.sub("", cleaned)
