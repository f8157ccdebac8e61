"""ZWNJ and the other invisible joiners: removal offered only when every other character is GSM-7.

``Mit besten\\u200c Grüßen`` goes as UCS-2 because of one invisible U+200C; in Persian text or an
emoji sequence the same character shapes what the reader sees, and that text is UCS-2 anyway.
"""

import pytest

from backend.notifications.sms_encoding import GSM7, UCS2, analyze, replace_lookalikes
from frontend.editor import preview

pytestmark = pytest.mark.usefixtures("demo_data")

JOINERS = ["\u200c", "\u200d", "\u2060", "\u2061", "\u2062", "\u2063", "\u2064", "\u00ad"]


@pytest.mark.parametrize("joiner", JOINERS, ids=[f"U+{ord(j):04X}" for j in JOINERS])
def test_in_an_otherwise_gsm7_text_the_joiner_can_go(joiner):
    text = f"Mit besten{joiner} Grüßen"
    analysis = analyze(text)
    assert analysis.encoding == UCS2
    assert [(c.char, c.replacement) for c in analysis.ucs2_characters] == [(joiner, "")]
    assert replace_lookalikes(text) == "Mit besten Grüßen"
    assert analyze(replace_lookalikes(text)).encoding == GSM7


@pytest.mark.parametrize(
    "text",
    ["می\u200cخواهم", "\U0001f468\u200d\U0001f469\u200d\U0001f467 ok", "x\u2062y ça"],
    ids=["persian-zwnj", "emoji-zwj", "with-c-cedilla"],
)
def test_where_another_character_keeps_the_text_ucs2_the_joiner_stays(text):
    joiners = [c for c in analyze(text).ucs2_characters if c.char in "\u200c\u200d\u2062"]
    assert joiners and all(c.replacement is None for c in joiners)
    assert replace_lookalikes(text) == text


def test_a_look_alike_elsewhere_still_lets_the_joiner_go():
    assert replace_lookalikes("Mit besten\u200c Grüßen – bis bald") == "Mit besten Grüßen - bis bald"


def test_the_editor_offers_the_removal_and_one_click_makes_it_gsm7(client, editor):
    client.force_login(editor)
    form = {"kind": "shipped", "language": "de", "channel": "sms", "country": "DE", "audience": "1000",
            "text_body": "Mit besten\u200c Grüßen, Ihr Shop"}  # fmt: skip
    body = client.post("/templates/preview/", form, HTTP_HX_REQUEST="true").content.decode()
    assert 'name="fix" value="10:200C"' in body
    assert "zero width non-joiner (U+200C) forces UCS-2: replace it with nothing (it is invisible)" in body
    fixed = client.post("/templates/preview/", {**form, "fix": "10:200C"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-swap-oob="true">\nMit besten Grüßen, Ihr Shop</textarea>' in fixed


def test_the_editor_never_removes_a_persian_zwnj_even_when_asked():
    assert preview.apply_fix("می\u200cخواهم", "2:200C") == "می\u200cخواهم"
