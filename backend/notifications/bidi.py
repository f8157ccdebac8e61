"""Isolation of the values a template inserts, so that a left-to-right run keeps its order in RTL mail.

"Order #A-1042" inside Arabic text reads "1042-A#" unless the value is isolated (Unicode
UAX #9, "isolates"). The platform does it, not the author:

* HTML part of an RTL mail: each inserted value in ``<bdi>`` where it lands in text; inside an
  attribute (``href="{{ url }}"``) or a raw-text element nothing is added. While rendering,
  values are wrapped in two Unicode noncharacters (``MARK_START``/``MARK_END``, never in
  interchanged text: params have them stripped); ``place_isolates`` turns them into ``<bdi>``
  or drops them, looking at where each landed.
* plain-text part: U+2068 FIRST STRONG ISOLATE … U+2069 POP DIRECTIONAL ISOLATE around a value
  whose direction is not the message's (``isolate_text``).
* SMS: nothing. Each isolate is a UCS-2 character: it would turn a GSM-7 text into UCS-2 and
  double the price of every part.

Blocks of RTL mail carry ``dir`` themselves (``with_block_direction``): Outlook's Word engine
ignores ``<html dir>`` inside tables.
"""

import re
import unicodedata

from markupsafe import Markup, escape

MARK_START = "\ufdd0"
MARK_END = "\ufdd1"
MARKS = frozenset({MARK_START, MARK_END})
FSI = "\u2068"  # FIRST STRONG ISOLATE
PDI = "\u2069"  # POP DIRECTIONAL ISOLATE

# Where an inserted value must not become markup: inside a tag (attribute values), a comment,
# or an element whose content the HTML parser reads as raw text.
_NOT_TEXT = re.compile(
    r"<(script|style|title|textarea|xmp)\b[^>]*>.*?</\1\s*>|<!--.*?-->|<[^>]*>", re.IGNORECASE | re.DOTALL
)
_AUTHOR_BDI = re.compile(f"(<bdi\\b[^>]*>){MARK_START}([^{MARK_START}{MARK_END}]*){MARK_END}(</bdi>)", re.IGNORECASE)
_BLOCKS = re.compile(
    r"<(table|thead|tbody|tfoot|tr|td|th|p|div|ul|ol|li|h[1-6]|blockquote|pre|center)\b(?![^>]*\sdir=)",
    re.IGNORECASE,
)


def first_strong(text: str) -> str | None:
    """``"rtl"``/``"ltr"`` by the first strongly directional character (bidi class R, AL or L), None if none."""
    for char in text:
        kind = unicodedata.bidirectional(char)
        if kind in ("R", "AL"):
            return "rtl"
        if kind == "L":
            return "ltr"
    return None


def isolate_text(value: str, direction: str) -> str:
    """``value`` between FSI and PDI unless it already reads in ``direction`` (a number in LTR text does).

    A value without strong characters (``+1 202 555 0143``) counts as left to right: in RTL text
    its digit groups would otherwise swap places.
    """
    if not value or (first_strong(value) or "ltr") == direction:
        return value
    return f"{FSI}{value}{PDI}"


def mark_html(value: str) -> Markup:
    """``value`` escaped for HTML between the two marks, for ``place_isolates`` to resolve."""
    return Markup(f"{MARK_START}{escape(value)}{MARK_END}")


def place_isolates(html: str) -> str:
    """Marked values become ``<bdi>…</bdi>`` where they are text; inside tags, comments and raw text the marks go.

    A value the author already put alone in a ``<bdi>`` is not wrapped twice.
    """
    html = _AUTHOR_BDI.sub(r"\1\2\3", html)
    out, position = [], 0
    for match in _NOT_TEXT.finditer(html):
        out.append(_to_bdi(html[position : match.start()]))
        out.append(strip_marks(match.group()))
        position = match.end()
    out.append(_to_bdi(html[position:]))
    return "".join(out)


def _to_bdi(text: str) -> str:
    return text.replace(MARK_START, "<bdi>").replace(MARK_END, "</bdi>")


def strip_marks(text: str) -> str:
    """``text`` without the two marks."""
    return text.replace(MARK_START, "").replace(MARK_END, "")


def with_block_direction(html: str, direction: str) -> str:
    """Every table, row, cell and block element without a ``dir`` gets ``dir=direction``."""
    return _BLOCKS.sub(lambda m: f'{m.group()} dir="{direction}"', html)
