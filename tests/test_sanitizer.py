"""The sanitizer drops what it removes (content and all) and keeps what real marketing mail needs.

Two rules, each table-driven: elements whose content is not text go with their content; a URL
whose scheme is not allowed goes from every attribute however it is written (character
references decimal, zero-padded or hex, tabs and newlines inside). Then an email builder's
fragment: inline styles within the CSS allow-list and ``<img>`` over https survive.
"""

import html
import re

import pytest

from backend.notifications.sanitizer import sanitize_html

CONTENT_TAGS = ["script", "style", "template", "noscript", "iframe", "object", "textarea", "svg", "math", "xmp"]


@pytest.mark.parametrize("tag", CONTENT_TAGS)
def test_an_element_whose_content_is_not_text_goes_with_its_content(tag):
    dirty = f"<p>before</p><{tag}>alert(1); body {{ color: red }}</{tag}><p>after</p>"
    assert sanitize_html(dirty) == "<p>before</p><p>after</p>"


def test_a_style_block_in_an_arabic_template_leaves_no_css_as_text():
    dirty = '<style>.x { color: red }</style><p dir="rtl" lang="ar">مرحبا</p><script>alert(1)</script>'
    assert sanitize_html(dirty) == '<p dir="rtl" lang="ar">مرحبا</p>'


JAVASCRIPT = [
    "javascript:alert(1)",
    "JaVaScRiPt:alert(1)",
    " javascript:alert(1)",
    "&#106;avascript:alert(1)",  # decimal
    "&#0000106;avascript:alert(1)",  # zero-padded decimal
    "&#0000106avascript:alert(1)",  # zero-padded, no semicolon
    "&#x6A;avascript:alert(1)",  # hex
    "&#x0006a;&#x61;vascript&#x3A;alert(1)",  # zero-padded hex, colon too
    "&#X6A;avascript:alert(1)",
    "java\tscript:alert(1)",  # a tab inside
    "java&#x09;script:alert(1)",
    "java\nscript:alert(1)",  # a newline inside
    "java&#10;script:alert(1)",
    "java&#13;script:alert(1)",
    "&#14;javascript:alert(1)",
    "vbscript:msgbox(1)",
    "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
]
# Every attribute that takes a URL somewhere, on an element where it would matter.
ATTRIBUTES = [
    ("a", "href"), ("img", "src"), ("form", "action"), ("button", "formaction"), ("table", "background"),
    ("td", "background"), ("a", "xlink:href"), ("img", "srcset"), ("img", "lowsrc"), ("video", "poster"),
    ("object", "data"), ("p", "title"), ("p", "style"),
]  # fmt: skip


def _attribute_values(cleaned: str) -> list[str]:
    """Every attribute value of the output, decoded as a browser would, tabs and newlines removed."""
    values = re.findall(r'=\s*"([^"]*)"', cleaned)
    return [re.sub(r"[\t\n\r]", "", html.unescape(value)).strip().lower() for value in values]


@pytest.mark.parametrize("url", JAVASCRIPT)
@pytest.mark.parametrize(("tag", "attribute"), ATTRIBUTES)
def test_a_script_url_goes_from_every_attribute_however_written(tag, attribute, url):
    value = url if attribute != "style" else f"background-image: url({url})"
    cleaned = sanitize_html(f'<{tag} {attribute}="{value}">x</{tag}>')
    assert not any(re.search(r"(javascript|vbscript|data):", v) for v in _attribute_values(cleaned)), cleaned


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ('<a href="https://example.com/o?id=1&amp;x=2">x</a>', '<a href="https://example.com/o?id=1&amp;x=2">x</a>'),
        ('<a href="mailto:help@example.com">x</a>', '<a href="mailto:help@example.com">x</a>'),
        ('<img src="https://cdn.example.com/a.png" alt="">', '<img src="https://cdn.example.com/a.png" alt="">'),
        ('<img src="/relative.png" alt="x">', ""),
        ('<img src="data:image/png;base64,iVBORw0KGgo=">', ""),
        ('<p onclick="alert(1)" dir="rtl">x</p>', '<p dir="rtl">x</p>'),
    ],
)
def test_allowed_urls_stay(dirty, clean):
    assert sanitize_html(dirty) == clean


BUILDER_FRAGMENT = (
    "<style>@media (max-width: 600px) { .col { width: 100% !important } }</style>"
    '<table role="presentation" width="600" cellpadding="0" cellspacing="0"'
    ' style="border-collapse: collapse; background-color: #ffffff;"><tr>'
    '<td class="col" align="right" dir="rtl" style="padding: 16px; font-family: Tahoma, Arial, sans-serif;'
    ' color: #1d2330; position: absolute; background-image: url(https://tracker.example/p.gif);">'
    '<img src="https://cdn.example.com/banner.png" alt="تخفيضات" width="568"'
    ' style="display: block; max-width: 100%; border: 0;">'
    '<h1 style="font-size: 24px; text-align: right;">خصم ٢٠٪</h1>'
    '<p style="line-height: 1.6;">على كل شيء حتى يوم الأحد.</p>'
    '<a href="https://shop.example.com/sale" style="color: #0b57d0; text-decoration: none; behavior: url(x.htc);">'
    "تسوّق الآن</a></td></tr></table>"
)


def test_an_email_builder_fragment_keeps_its_allowed_parts():
    cleaned = sanitize_html(BUILDER_FRAGMENT)
    assert "@media" not in cleaned and "<style" not in cleaned
    assert (
        '<table role="presentation" width="600" cellpadding="0" cellspacing="0" '
        'style="border-collapse: collapse; background-color: #ffffff;">'
    ) in cleaned
    assert (
        '<td align="right" dir="rtl" style="padding: 16px; font-family: Tahoma, Arial, sans-serif; color: #1d2330;">'
    ) in cleaned
    assert (
        '<img src="https://cdn.example.com/banner.png" alt="تخفيضات" width="568" '
        'style="display: block; max-width: 100%; border: 0;">'
    ) in cleaned
    assert '<h1 style="font-size: 24px; text-align: right;">خصم ٢٠٪</h1>' in cleaned
    assert '<p style="line-height: 1.6;">على كل شيء حتى يوم الأحد.</p>' in cleaned
    assert (
        '<a href="https://shop.example.com/sale" style="color: #0b57d0; text-decoration: none;">تسوّق الآن</a>'
        in cleaned
    )
    assert "position" not in cleaned and "tracker" not in cleaned and "behavior" not in cleaned


def test_bdo_goes_and_its_text_stays_unreversed_while_bdi_stays():
    # <bdo dir="rtl"> shows "moc.knab-ruoy" as "your-bank.com" on a link to somewhere else.
    dirty = '<a href="https://evil.example/">https://<bdo dir="rtl">moc.knab-ruoy</bdo></a> <bdi>5012</bdi>'
    assert sanitize_html(dirty) == '<a href="https://evil.example/">https://moc.knab-ruoy</a> <bdi>5012</bdi>'
