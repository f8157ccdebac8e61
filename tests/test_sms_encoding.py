"""SMS encoding, length and split by 3GPP TS 23.038 / TS 23.040.

Every expected figure below was worked out by hand from the spec, not by the
code under test: a default-alphabet character (TS 23.038 §6.2.1) is 1 septet,
an extension character (§6.2.1.1) 2; one character outside both makes the
text UCS-2, counted in UTF-16 code units (a non-BMP character is 2). A single
SMS holds 160 septets / 70 units, each part of a concatenated one 153 / 67
(TS 23.040 §9.2.3.24.1), and no part ends inside an escape sequence or a
surrogate pair.
"""

import dataclasses
import random

import pytest

from backend.notifications import sms_encoding
from backend.notifications.sms_encoding import REPLACEMENTS, analyze, encoding_and_segments, replace_lookalikes

GSM, UCS = "GSM-7", "UCS-2"

# The 39 characters of the default alphabet that are not ASCII, in code order (§6.2.1).
GSM7_NON_ASCII = (
    "\u00a3\u00a5\u00e8\u00e9\u00f9\u00ec\u00f2\u00c7\u00d8\u00f8\u00c5\u00e5"  # £¥èéùìòÇØøÅå
    "\u0394\u03a6\u0393\u039b\u03a9\u03a0\u03a8\u03a3\u0398\u039e"  # ΔΦΓΛΩΠΨΣΘΞ
    "\u00c6\u00e6\u00df\u00c9\u00a4\u00a1\u00c4\u00d6\u00d1\u00dc\u00a7"  # ÆæßÉ¤¡ÄÖÑÜ§
    "\u00bf\u00e4\u00f6\u00f1\u00fc\u00e0"  # ¿äöñüà
)
EXTENSION = "\f^{}\\[~]|€"
FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467"  # 👨‍👩‍👧: man ZWJ woman ZWJ girl
BEH = "ب"  # Arabic letter beh, one UTF-16 unit
SMILE = "😀"  # U+1F600, a surrogate pair: two units

# (text, encoding, units, segments)
TABLE = [
    # The default alphabet, and the empty text (one segment, see analyze()).
    pytest.param("", GSM, 0, 1, id="empty"),
    pytest.param("Hello", GSM, 5, 1, id="ascii"),
    pytest.param("Your code is 123456", GSM, 19, 1, id="otp"),
    pytest.param("@£$¥èéùìòÇ", GSM, 10, 1, id="gsm-0x00-0x09"),
    pytest.param("ØøÅåΔ_ΦΓΛΩ", GSM, 10, 1, id="gsm-0x0b-0x15"),
    pytest.param("ΠΨΣΘΞÆæß\u00c9\u00a4", GSM, 10, 1, id="gsm-0x16-0x24"),
    pytest.param("¡ÄÖÑ\u00dc\u00a7¿äöñüà", GSM, 12, 1, id="gsm-0x40-0x7f"),
    pytest.param(GSM7_NON_ASCII, GSM, 39, 1, id="every-non-ascii-letter"),
    pytest.param("Line 1\nLine 2\r\n", GSM, 15, 1, id="lf-and-cr"),
    pytest.param("Ç", GSM, 1, 1, id="capital-c-cedilla-0x09"),
    pytest.param("ñ", GSM, 1, 1, id="n-tilde"),
    # 94 printable ASCII characters without the backtick: 86 of them 1 septet, [\]^{|}~ 2 each.
    pytest.param("".join(chr(code) for code in range(0x20, 0x7F) if chr(code) != "`"), GSM, 102, 1, id="ascii-all"),
    # The extension table: 2 septets each (escape + code).
    pytest.param("\f", GSM, 2, 1, id="ext-form-feed"),
    pytest.param("^", GSM, 2, 1, id="ext-caret"),
    pytest.param("{", GSM, 2, 1, id="ext-left-brace"),
    pytest.param("}", GSM, 2, 1, id="ext-right-brace"),
    pytest.param("\\", GSM, 2, 1, id="ext-backslash"),
    pytest.param("[", GSM, 2, 1, id="ext-left-bracket"),
    pytest.param("~", GSM, 2, 1, id="ext-tilde"),
    pytest.param("]", GSM, 2, 1, id="ext-right-bracket"),
    pytest.param("|", GSM, 2, 1, id="ext-bar"),
    pytest.param("€", GSM, 2, 1, id="ext-euro"),
    pytest.param(EXTENSION, GSM, 20, 1, id="ext-all"),
    pytest.param("{[(|)]}", GSM, 12, 1, id="brackets"),  # 5 × 2 + ( and ) × 1
    pytest.param("Total: 5€ ~ 6$", GSM, 16, 1, id="mixed-ext"),  # 12 basic + € and ~ × 2
    # One character outside GSM-7 makes the whole text UCS-2.
    pytest.param("ç", UCS, 1, 1, id="small-c-cedilla"),
    pytest.param("á", UCS, 1, 1, id="a-acute"),
    pytest.param("`", UCS, 1, 1, id="backtick"),
    pytest.param("it`s", UCS, 4, 1, id="backtick-in-word"),
    pytest.param("it’s", UCS, 4, 1, id="smart-apostrophe"),
    pytest.param("“Hi”", UCS, 4, 1, id="smart-double-quotes"),
    pytest.param("10\u00a0km", UCS, 5, 1, id="no-break-space"),
    pytest.param("a\tb", UCS, 3, 1, id="tab"),
    pytest.param("Wait…", UCS, 5, 1, id="ellipsis"),
    pytest.param("2–3", UCS, 3, 1, id="en-dash"),
    pytest.param("a\u200bb", UCS, 3, 1, id="zero-width-space"),
    pytest.param("€" + BEH, UCS, 2, 1, id="euro-is-one-unit-in-ucs2"),
    pytest.param(SMILE, UCS, 2, 1, id="emoji"),
    pytest.param("OK 👍", UCS, 5, 1, id="emoji-after-text"),
    pytest.param("👍🏽", UCS, 4, 1, id="emoji-skin-tone"),  # U+1F44D U+1F3FD
    pytest.param(FAMILY, UCS, 8, 1, id="zwj-family"),  # 2 + 1 + 2 + 1 + 2
    pytest.param("مرحبا", UCS, 5, 1, id="arabic"),
    pytest.param("رمز التحقق: 4821", UCS, 16, 1, id="arabic-otp"),
    pytest.param("پچژگی", UCS, 5, 1, id="persian-letters"),
    pytest.param("کد شما ۱۲۳۴ است", UCS, 15, 1, id="persian-digits"),
    # GSM-7 boundaries: 160 alone, 153 per part.
    pytest.param("A" * 160, GSM, 160, 1, id="gsm-160"),
    pytest.param("A" * 161, GSM, 161, 2, id="gsm-161"),
    pytest.param("€" * 80, GSM, 160, 1, id="gsm-80-euros"),
    pytest.param("€" * 80 + "A", GSM, 161, 2, id="gsm-80-euros-and-1"),
    pytest.param("A" * 306, GSM, 306, 2, id="gsm-306"),
    pytest.param("A" * 307, GSM, 307, 3, id="gsm-307"),
    pytest.param("A" * 304 + "€", GSM, 306, 2, id="gsm-306-escape-ends-part-2"),
    pytest.param("]" * 153, GSM, 306, 3, id="gsm-306-of-escapes"),  # 76 + 76 + 1 characters
    pytest.param("A" * 152 + "€" + "A" * 152, GSM, 306, 3, id="gsm-306-escape-on-boundary"),
    # UCS-2 boundaries: 70 alone, 67 per part.
    pytest.param(BEH * 70, UCS, 70, 1, id="ucs2-70"),
    pytest.param(BEH * 71, UCS, 71, 2, id="ucs2-71"),
    pytest.param(BEH * 134, UCS, 134, 2, id="ucs2-134"),
    pytest.param(BEH * 135, UCS, 135, 3, id="ucs2-135"),
    pytest.param(SMILE * 35, UCS, 70, 1, id="ucs2-35-emoji"),
    pytest.param(SMILE * 67, UCS, 134, 3, id="ucs2-134-of-emoji"),  # 33 + 33 + 1 emoji
    pytest.param("A" * 159 + "`", UCS, 160, 3, id="one-backtick-triples-the-cost"),
    pytest.param("A" * 159 + "’", UCS, 160, 3, id="one-smart-quote-triples-the-cost"),
]


@pytest.mark.parametrize(("text", "encoding", "units", "segments"), TABLE)
def test_encoding_units_and_segments(text, encoding, units, segments):
    analysis = analyze(text)
    assert (analysis.encoding, analysis.units, analysis.segments) == (encoding, units, segments)
    assert len(analysis.parts) == segments
    assert "".join(analysis.parts) == text


@pytest.mark.parametrize(("text", "encoding", "units", "segments"), TABLE)
def test_the_engines_count_bills_the_same_segments(text, encoding, units, segments):
    # What a delivery prices each SMS by: the same encoding and segments without the parts.
    assert encoding_and_segments(text) == (encoding, segments)


def test_the_engines_count_agrees_with_analyze_on_mixed_texts():
    # Texts around the limits (70/67 units, 160/153 septets) mixing what changes the count: extension
    # characters (2 septets), emoji (surrogate pairs), Arabic, joiners; half of them GSM-7 only, half
    # with one UCS-2 character at most every few. A fixed seed: the same 2,000 texts every run.
    gsm = ["A", " ", "]", "€", "\f", "é"]
    mixed = [*gsm, BEH, SMILE, "\u200c", "’"]
    rng = random.Random(20261202)
    for n in range(2000):
        pool, weights = (gsm, [60, 15, 4, 2, 1, 3]) if n % 2 else (mixed, [40, 10, 3, 2, 1, 3, 8, 2, 1, 1])
        text = "".join(rng.choices(pool, weights=weights, k=rng.randint(0, 340)))
        analysis = analyze(text)
        assert encoding_and_segments(text) == (analysis.encoding, analysis.segments), text


def test_the_table_has_at_least_40_texts():
    assert len(TABLE) >= 40


# TS 23.038 §6.2.1: the codes whose character is not the ASCII character of the same code.
SPEC_DIFFERS_FROM_ASCII = {
    0x00: 0x40, 0x01: 0xA3, 0x02: 0x24, 0x03: 0xA5, 0x04: 0xE8, 0x05: 0xE9, 0x06: 0xF9, 0x07: 0xEC,
    0x08: 0xF2, 0x09: 0xC7, 0x0B: 0xD8, 0x0C: 0xF8, 0x0E: 0xC5, 0x0F: 0xE5,
    0x10: 0x394, 0x11: 0x5F, 0x12: 0x3A6, 0x13: 0x393, 0x14: 0x39B, 0x15: 0x3A9, 0x16: 0x3A0, 0x17: 0x3A8,
    0x18: 0x3A3, 0x19: 0x398, 0x1A: 0x39E, 0x1C: 0xC6, 0x1D: 0xE6, 0x1E: 0xDF, 0x1F: 0xC9,
    0x24: 0xA4, 0x40: 0xA1, 0x5B: 0xC4, 0x5C: 0xD6, 0x5D: 0xD1, 0x5E: 0xDC, 0x5F: 0xA7,
    0x60: 0xBF, 0x7B: 0xE4, 0x7C: 0xF6, 0x7D: 0xF1, 0x7E: 0xFC, 0x7F: 0xE0,
}  # fmt: skip


def test_the_default_alphabet_is_the_spec_table_in_code_order():
    # 0x0A LF, 0x0D CR and 0x1B (the escape) keep their ASCII control codes.
    expected = [SPEC_DIFFERS_FROM_ASCII.get(code, code) for code in range(128)]
    assert [ord(char) for char in sms_encoding._DEFAULT_ALPHABET] == expected


def test_every_non_ascii_default_alphabet_character_is_one_septet():
    for char in GSM7_NON_ASCII + "@$_":
        assert (analyze(char).encoding, analyze(char).units) == (GSM, 1), char


def test_every_extension_character_is_two_septets():
    for char in EXTENSION:
        assert (analyze(char).encoding, analyze(char).units) == (GSM, 2), repr(char)


def lengths(text: str) -> list[int]:
    return [len(part) for part in analyze(text).parts]


@pytest.mark.parametrize(
    ("text", "part_lengths", "units_left"),
    [
        pytest.param("A" * 161, [153, 8], 145, id="gsm-plain"),
        pytest.param("]" * 153, [76, 76, 1], 151, id="gsm-escapes-152-per-part"),
        pytest.param("a" * 152 + "€" + "b" * 10, [152, 11], 141, id="escape-moves-to-part-2"),
        pytest.param("a" * 151 + "€" + "b" * 10, [152, 10], 143, id="escape-ends-part-1-exactly"),
        pytest.param("A" * 152 + "€" + "A" * 152, [152, 152, 1], 152, id="escape-on-boundary-adds-a-part"),
        pytest.param("a" * 66 + SMILE + "b" * 10, [66, 11], 55, id="surrogate-pair-moves-to-part-2"),
        pytest.param(BEH * 65 + SMILE + BEH * 5, [66, 5], 62, id="surrogate-pair-ends-part-1-exactly"),
        pytest.param(SMILE * 67, [33, 33, 1], 65, id="emoji-66-units-per-part"),
        pytest.param(BEH * 71, [67, 4], 63, id="ucs2-plain"),
    ],
)
def test_parts_never_cut_an_escape_or_a_surrogate_pair(text, part_lengths, units_left):
    analysis = analyze(text)
    assert lengths(text) == part_lengths
    assert analysis.units_left == units_left
    assert "".join(analysis.parts) == text


def test_the_part_after_a_moved_escape_starts_with_it():
    assert analyze("a" * 152 + "€" + "b" * 10).parts[1] == "€" + "b" * 10
    assert analyze("a" * 66 + SMILE + "b" * 10).parts[1] == SMILE + "b" * 10


@pytest.mark.parametrize(
    ("text", "units_left", "capacity"),
    [
        ("", 160, 160),
        ("Hello", 155, 160),
        ("€", 158, 160),
        ("A" * 160, 0, 160),
        ("A" * 161, 145, 153),
        (SMILE, 68, 70),
        (BEH * 70, 0, 70),
        (BEH * 135, 66, 67),
    ],
)
def test_units_left_in_the_current_segment(text, units_left, capacity):
    analysis = analyze(text)
    assert (analysis.units_left, analysis.segment_capacity) == (units_left, capacity)


def test_an_empty_text_is_one_empty_gsm7_segment():
    analysis = analyze("")
    assert (analysis.encoding, analysis.units, analysis.segments, analysis.parts, analysis.units_left) == (
        GSM, 0, 1, ("",), 160,
    )  # fmt: skip


def test_units_are_named_for_labels():
    assert (analyze("a").unit_name, analyze("ب").unit_name) == ("septets", "UTF-16 code units")


def test_the_analysis_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        analyze("a").units = 0


def test_ucs2_characters_have_their_str_index_and_look_alike():
    analysis = analyze("It’s 5\u00a0km — “go”…")
    assert analysis.ucs2_characters == (
        ("’", 2, "'"),
        ("\u00a0", 6, " "),
        ("—", 10, "-"),
        ("“", 12, '"'),
        ("”", 15, '"'),
        ("…", 16, "..."),
    )


def test_ucs2_character_index_counts_an_emoji_once():
    assert analyze("a" + SMILE + "b`").ucs2_characters == ((SMILE, 1, None), ("`", 3, "'"))


def test_characters_without_a_look_alike_have_none():
    assert analyze("ç").ucs2_characters == (("ç", 0, None),)
    assert [c.replacement for c in analyze("مر").ucs2_characters] == [None, None]
    assert [c.replacement for c in analyze(FAMILY).ucs2_characters] == [None] * 5


def test_invisible_characters_are_replaced_by_nothing():
    assert analyze("x\u200by").ucs2_characters == (("\u200b", 1, ""),)


def test_gsm7_text_lists_no_ucs2_characters():
    assert analyze("Hello €[]").ucs2_characters == ()


def test_replacing_look_alikes_brings_a_2_segment_ucs2_text_to_1_gsm7_segment():
    text = "Don’t miss it — our “summer” sale ends tonight… Use code SUN at checkout."
    before = analyze(text)
    assert (before.encoding, before.units, before.segments) == (UCS, 73, 2)
    fixed = replace_lookalikes(text)
    assert fixed == 'Don\'t miss it - our "summer" sale ends tonight... Use code SUN at checkout.'
    after = analyze(fixed)
    assert (after.encoding, after.units, after.segments, after.units_left) == (GSM, 75, 1, 85)


def test_replacing_look_alikes_leaves_what_has_none():
    assert replace_lookalikes("سلام — 😀 ç") == "سلام - 😀 ç"
    assert replace_lookalikes("plain [gsm]") == "plain [gsm]"


def test_every_replacement_is_gsm7_and_every_replaced_character_is_not():
    for char, replacement in REPLACEMENTS.items():
        assert analyze(char).encoding == UCS, repr(char)
        assert analyze(replacement).encoding == GSM, repr(char)
