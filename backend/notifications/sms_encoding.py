"""Exact SMS encoding, length and split into parts, by 3GPP TS 23.038 and TS 23.040.

A message is sent in the GSM 7-bit default alphabet when every character is in
it or in its extension table; a single character outside both makes the whole
message UCS-2. The two count in different units:

* **GSM-7** counts *septets*. A default-alphabet character (TS 23.038 §6.2.1)
  is one septet; an extension-table character (§6.2.1.1: form feed
  ``^ { } \\ [ ~ ] |`` and ``€``) is two, the escape 0x1B and its code.
* **UCS-2** (§6.2.3) counts *UTF-16 code units*. Handsets decode the user data
  as UTF-16, so a character beyond U+FFFF (an emoji) is a surrogate pair of two
  units, and a ZWJ emoji sequence is the sum of its parts.

One SMS carries 140 octets of user data (TS 23.040 §9.2.3.16): 160 septets or
70 units. A concatenated message spends 6 of them on the user data header
(UDHL + the 8-bit-reference concatenation element, §9.2.3.24.1), leaving 67
units, or 153 septets (the 48-bit header padded to 7 septets: 160 − 7) per
part. §9.2.3.24.1 also says an escape sequence and a UCS-2 character "shall
not be split in the middle": a part ends early instead, which is why 153 ×
``]`` (306 septets) needs three parts, not two.

The national language shift tables (TS 23.038 Annex A: Turkish, Spanish,
Portuguese, Indian languages) are not used: providers do not apply them uniformly, so counting
with them would promise prices the gateway does not keep.
"""

from dataclasses import dataclass
from typing import Literal, NamedTuple

Encoding = Literal["GSM-7", "UCS-2"]
GSM7: Encoding = "GSM-7"
UCS2: Encoding = "UCS-2"

# TS 23.040 §9.2.3.16 and §9.2.3.24.1: (single message, each part of a concatenated one).
GSM7_SINGLE, GSM7_PART = 160, 153  # septets
UCS2_SINGLE, UCS2_PART = 70, 67  # UTF-16 code units
_LIMITS: dict[str, tuple[int, int]] = {GSM7: (GSM7_SINGLE, GSM7_PART), UCS2: (UCS2_SINGLE, UCS2_PART)}

# TS 23.038 §6.2.1, the default alphabet in code order 0x00–0x7F, one row per 16 codes.
# Not ASCII: 0x02 is $ and 0x24 is ¤, 0x09 is capital Ç (small ç is absent), the
# backtick is absent, and 0x1B (written \x1b here) is the escape to the extension table.
_DEFAULT_ALPHABET = (
    "@£$¥èéùìòÇ\nØø\rÅå"  # 0x00–0x0F
    "Δ_ΦΓΛΩΠΨΣΘΞ\x1bÆæßÉ"  # 0x10–0x1F
    " !\"#¤%&'()*+,-./"  # 0x20–0x2F
    "0123456789:;<=>?"  # 0x30–0x3F
    "¡ABCDEFGHIJKLMNO"  # 0x40–0x4F
    "PQRSTUVWXYZÄÖÑÜ§"  # 0x50–0x5F
    "¿abcdefghijklmno"  # 0x60–0x6F
    "pqrstuvwxyzäöñüà"  # 0x70–0x7F
)
# TS 23.038 §6.2.1.1, the extension table: code after the escape → character.
_EXTENSION_TABLE = {
    0x0A: "\f",
    0x14: "^",
    0x28: "{",
    0x29: "}",
    0x2F: "\\",
    0x3C: "[",
    0x3D: "~",
    0x3E: "]",
    0x40: "|",
    0x65: "€",
}

GSM7_BASIC = frozenset(_DEFAULT_ALPHABET) - {"\x1b"}
GSM7_EXTENSION = frozenset(_EXTENSION_TABLE.values())
# Septets each GSM-7 character costs; a character not in here forces UCS-2.
_SEPTETS: dict[str, int] = {**dict.fromkeys(GSM7_BASIC, 1), **dict.fromkeys(GSM7_EXTENSION, 2)}

# GSM-7 look-alikes of characters that force UCS-2 and so halve (or worse) what
# a segment holds. They arrive by paste from word processors and CMSs: "smart"
# punctuation, typographic spaces, invisible characters. Each maps to what a
# reader would not tell apart on a handset, never to a change of meaning, so
# letters with accents outside GSM-7 (á, ç, ı…) are left alone: 0x09 is capital
# Ç, and "fixing" ç to it would capitalise a word. "" marks an invisible
# character whose removal changes nothing shown. ZWJ and ZWNJ are absent on
# purpose: they shape emoji and Persian words, which are UCS-2 anyway.
REPLACEMENTS: dict[str, str] = {
    # Quotes and apostrophes (Word's autocorrect, macOS smart quotes), and the
    # backtick, which is ASCII but not in the default alphabet.
    "\u2018": "'",  # ‘ left single quotation mark
    "\u2019": "'",  # ’ right single quotation mark, the typographic apostrophe
    "\u201a": "'",  # ‚ single low-9 quotation mark
    "\u201b": "'",  # ‛ single high-reversed-9 quotation mark
    "\u2032": "'",  # ′ prime
    "\u02bc": "'",  # ʼ modifier letter apostrophe
    "\u00b4": "'",  # ´ acute accent used as an apostrophe
    "`": "'",  # grave accent / backtick
    "\u201c": '"',  # “ left double quotation mark
    "\u201d": '"',  # ” right double quotation mark
    "\u201e": '"',  # „ double low-9 quotation mark
    "\u201f": '"',  # ‟ double high-reversed-9 quotation mark
    "\u2033": '"',  # ″ double prime
    "\u00ab": '"',  # « left-pointing double angle quotation mark
    "\u00bb": '"',  # » right-pointing double angle quotation mark
    "\u2039": "<",  # ‹ single left-pointing angle quotation mark
    "\u203a": ">",  # › single right-pointing angle quotation mark
    # Dashes and minus signs.
    "\u2010": "-",  # ‐ hyphen
    "\u2011": "-",  # ‑ non-breaking hyphen
    "\u2012": "-",  # ‒ figure dash
    "\u2013": "-",  # – en dash
    "\u2014": "-",  # — em dash
    "\u2015": "-",  # ― horizontal bar
    "\u2212": "-",  # − minus sign
    "\u2043": "-",  # ⁃ hyphen bullet
    # Spaces: a no-break space from "&nbsp;" in a CMS is the classic silent price doubler.
    "\u00a0": " ",  # no-break space
    "\u2000": " ",  # en quad
    "\u2001": " ",  # em quad
    "\u2002": " ",  # en space
    "\u2003": " ",  # em space
    "\u2004": " ",  # three-per-em space
    "\u2005": " ",  # four-per-em space
    "\u2006": " ",  # six-per-em space
    "\u2007": " ",  # figure space
    "\u2008": " ",  # punctuation space
    "\u2009": " ",  # thin space
    "\u200a": " ",  # hair space
    "\u202f": " ",  # narrow no-break space (French punctuation, CLDR number formats)
    "\u205f": " ",  # medium mathematical space
    "\u3000": " ",  # ideographic space
    # Invisible characters: nothing to see, everything to pay.
    "\u200b": "",  # zero width space
    "\u2060": "",  # word joiner
    "\ufeff": "",  # zero width no-break space / byte order mark
    "\u00ad": "",  # soft hyphen
    # Other punctuation.
    "\u2026": "...",  # … horizontal ellipsis
    "\u2022": "-",  # • bullet
    "\u2023": "-",  # ‣ triangular bullet
    "\u25e6": "-",  # ◦ white bullet
    "\u00b7": ".",  # · middle dot
    "\u2219": ".",  # ∙ bullet operator
    "\u2024": ".",  # ․ one dot leader
    "\u2044": "/",  # ⁄ fraction slash
    "\u2215": "/",  # ∕ division slash
    "\u00d7": "x",  # × multiplication sign ("2×3")
    "\u02c6": "^",  # ˆ modifier letter circumflex (an extension character: 2 septets)
    "\u02dc": "~",  # ˜ small tilde (an extension character: 2 septets)
    # Compatibility characters whose canonical form is in the default alphabet.
    "\u2126": "Ω",  # Ω ohm sign → Greek capital omega, 0x15
    "\u2206": "Δ",  # ∆ increment → Greek capital delta, 0x10
    "\u212b": "Å",  # Å angstrom sign → 0x0E
}


# Joiners and invisible operators: U+200C ZWNJ and U+200D ZWJ shape Persian words and emoji, U+2061–U+2064
# (function application, invisible times/separator/plus) mark up maths. In a text whose every other
# character is GSM-7 (or has a look-alike) they shape nothing a handset shows, and one of them makes the
# whole message UCS-2: "Mit besten\u200c Grüßen" costs a second segment. Only then is their removal
# offered; in Persian or emoji text (UCS-2 anyway) they stay. U+2060 and U+00AD are in REPLACEMENTS: they
# never shape anything.
JOINERS = frozenset({"\u200c", "\u200d", "\u2061", "\u2062", "\u2063", "\u2064"})


def joiners_removable(text: str) -> bool:
    """Whether the joiners of ``text`` may go: every other character is GSM-7 or has a GSM-7 look-alike."""
    return all(char in _SEPTETS or char in REPLACEMENTS or char in JOINERS for char in text)


class Ucs2Character(NamedTuple):
    """A character that forces UCS-2.

    ``index`` is its Python ``str`` index (a code point offset, not a UTF-16
    one: an emoji before it counts once). ``replacement`` is its GSM-7
    look-alike, "" for an invisible character that can simply go, or None when
    there is none.
    """

    char: str
    index: int
    replacement: str | None


@dataclass(frozen=True)
class SmsAnalysis:
    """How a text travels as SMS.

    ``units`` is the whole text's length in the encoding's unit: septets for
    GSM-7, UTF-16 code units for UCS-2. ``parts`` are the texts of the
    segments, in order (``"".join(parts)`` is the text); ``segments`` is their
    count, what a provider bills. ``units_left`` is what still fits in the last
    segment before another one is needed (an extension character needs 2 of
    them, an emoji 2). ``ucs2_characters`` lists, in order, every character
    outside GSM-7; it is empty exactly when ``encoding`` is GSM-7.
    """

    encoding: Encoding
    units: int
    segments: int
    parts: tuple[str, ...]
    units_left: int
    ucs2_characters: tuple[Ucs2Character, ...]

    @property
    def unit_name(self) -> str:
        """``"septets"`` or ``"UTF-16 code units"``, for labels."""
        return "septets" if self.encoding == GSM7 else "UTF-16 code units"

    @property
    def segment_capacity(self) -> int:
        """Units the current segment holds: 160 / 70 alone, 153 / 67 as a part of several."""
        single, part = _LIMITS[self.encoding]
        return single if self.segments == 1 else part


def is_gsm7(char: str) -> bool:
    """Whether one character is in the default alphabet or its extension table."""
    return char in _SEPTETS


def utf16_units(char: str) -> int:
    """UTF-16 code units of one code point: 2 beyond the Basic Multilingual Plane (a surrogate pair), else 1."""
    return 2 if ord(char) > 0xFFFF else 1


# Every GSM-7 character, and the extension table's as a tuple for str.count.
_GSM7_ALL = GSM7_BASIC | GSM7_EXTENSION
_EXTENSION_CHARS = tuple(sorted(GSM7_EXTENSION))


def encoding_and_segments(text: str) -> tuple[Encoding, int]:
    """``(analyze(text).encoding, analyze(text).segments)``: what a provider bills for ``text``, without its parts.

    The delivery engine prices every SMS it sends and needs only these two; ``analyze`` also lists
    each UCS-2 character, its look-alike and the parts' texts for the editor, at ten times the cost
    for a short message. Units as in ``analyze``: septets for GSM-7 (an extension character is two,
    TS 23.038 §6.2.1.1), UTF-16 code units for UCS-2 (§6.2.3). When no character costs two units the
    parts are plain divisions (153 or 67 units each, TS 23.040 §9.2.3.24.1); otherwise the split must
    keep an escape sequence or a surrogate pair whole, and ``analyze`` counts it.
    """
    if _GSM7_ALL.issuperset(text):
        encoding, units = GSM7, len(text) + sum(map(text.count, _EXTENSION_CHARS))
    else:
        encoding, units = UCS2, len(text.encode("utf-16-le")) // 2
    single, part = _LIMITS[encoding]
    if units <= single:
        return encoding, 1
    if units == len(text):
        return encoding, -(-units // part)
    return encoding, analyze(text).segments


def analyze(text: str) -> SmsAnalysis:
    """Encoding, length, segments and parts of ``text`` as one SMS (see the module docstring).

    An empty text is one GSM-7 segment with one empty part: TS 23.040 allows a
    TP-User-Data-Length of 0, and a gateway that accepts it still sends and
    bills one SMS-SUBMIT. Pricing it at zero would understate the cost of a
    template whose params all render empty.
    """
    replacements = {**REPLACEMENTS, **dict.fromkeys(JOINERS, "")} if joiners_removable(text) else REPLACEMENTS
    ucs2 = tuple(
        Ucs2Character(char, index, replacements.get(char)) for index, char in enumerate(text) if char not in _SEPTETS
    )
    encoding = UCS2 if ucs2 else GSM7
    costs = [utf16_units(char) for char in text] if ucs2 else [_SEPTETS[char] for char in text]
    units = sum(costs)
    single, part = _LIMITS[encoding]
    if units <= single:
        return SmsAnalysis(encoding, units, 1, (text,), single - units, ucs2)
    parts, last = _split(text, costs, part)
    return SmsAnalysis(encoding, units, len(parts), parts, part - last, ucs2)


def _split(text: str, costs: list[int], capacity: int) -> tuple[tuple[str, ...], int]:
    """Cut ``text`` into parts of at most ``capacity`` units, never inside a character.

    ``costs[i]`` is what ``text[i]`` costs, so an escape sequence (2 septets)
    or a surrogate pair (2 units, one Python character) moves whole to the next
    part when it does not fit (TS 23.040 §9.2.3.24.1). Filling each part in
    order is optimal: no split of a sequence into contiguous parts has fewer.
    Returns the parts and the units used in the last one.
    """
    parts: list[str] = []
    start = used = 0
    for index, cost in enumerate(costs):
        if used + cost > capacity:
            parts.append(text[start:index])
            start, used = index, 0
        used += cost
    parts.append(text[start:])
    return tuple(parts), used


def replace_lookalikes(text: str) -> str:
    """``text`` with every character that has a GSM-7 look-alike replaced by it.

    Characters without one (Arabic letters, emoji, ç) stay, so the result is
    GSM-7 only when every UCS-2 character had a replacement. Joiners (``JOINERS``)
    go only when ``joiners_removable(text)``.
    """
    if all(char in _SEPTETS for char in text):
        return text
    removable = joiners_removable(text)
    return "".join("" if removable and char in JOINERS else REPLACEMENTS.get(char, char) for char in text)
