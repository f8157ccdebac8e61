"""Script saved into an email template never runs anywhere the template is shown or sent.

An editor saves the classic payloads (``<script>``, ``javascript:`` links plain
and entity-encoded, event handlers, SVG ``<animate>``/``<set>``, mXSS shapes)
into the subject, text and HTML body of an email template. Every page that
shows it — the editor (saved and live preview), the list, the admin change
page — and the mail a worker really sends through SMTP are parsed as a
browser would and searched for anything active. The email preview is an
``<iframe sandbox="">`` whose ``srcdoc`` is escaped and is checked as a
document of its own.
"""

import re
from collections import Counter
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User

from backend.notifications.delivery import dispatch
from backend.notifications.models import Kind, Notification, TemplateVersion

pytestmark = pytest.mark.usefixtures("demo_data")

HTML_PAYLOADS = [
    '<p dir="ltr" lang="en">kept: <b>bold</b>, <a href="https://example.com/t/{{ order }}">a real link</a></p>',
    "<script>alert('s')</script>",
    '<a href="javascript:alert(1)">plain</a>',
    '<a href="&#106;avascript:alert(2)">decimal entity</a>',
    '<a href="&#x6A;&#x61;vascript&#58;alert(3)">hex entities</a>',
    '<a href="jav&#x09;ascript:alert(4)">tab inside</a>',
    '<a href=" JaVaScRiPt:alert(5)">case and space</a>',
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCg2KTwvc2NyaXB0Pg==">data URL</a>',
    "<img src=x onerror=alert(7)>",
    '<p onclick="alert(8)" onmouseover=alert(9)>handlers</p>',
    "<body onload=alert(10)>",
    '<svg><animate attributeName="href" values="javascript:alert(11)"/><a><text>svg animate</text></a></svg>',
    '<svg><set attributeName="onmouseover" to="alert(12)"/></svg>',
    '<svg><a xlink:href="javascript:alert(13)"><text>xlink</text></a></svg>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(14)>",
    '<iframe srcdoc="<script>alert(15)</script>"></iframe>',
    '<form action="javascript:alert(16)"><button formaction="javascript:alert(17)">go</button></form>',
    '<noscript><p title="</noscript><img src=x onerror=alert(18)>"></noscript>',
    "<style>@import 'javascript:alert(19)';</style>",
    "<!--><script>alert(20)</script>-->",
    '"><script>alert(21)</script>',
]
SUBJECT = "Order {{ order }} <script>alert('subject')</script>"
TEXT = "Order {{ order }} <script>alert('text')</script> <img src=x onerror=alert('text')>"
HTML = "\n".join(HTML_PAYLOADS)

# Elements and URL attributes that can run script (or load a document that does).
ACTIVE_TAGS = {"script", "svg", "math", "animate", "set", "iframe", "frame", "object", "embed", "base", "style",
               "img", "noscript", "form", "button"}  # fmt: skip
URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "values", "to", "from", "background"}
# What the editor's pages legitimately carry: their own forms and buttons, and the preview frame.
PAGE_TAGS = {"form", "button", "iframe"}


def _is_script_url(value: str) -> bool:
    compact = re.sub(r"[\x00-\x20]", "", value).lower()  # browsers drop these inside a scheme
    return compact.startswith(("javascript:", "vbscript:", "data:text/html"))


class ActiveContent(HTMLParser):
    """Collects what would run in a browser. Entities are decoded first, as a browser does."""

    def __init__(self, allowed_tags: set[str]):
        super().__init__(convert_charrefs=True)
        self.allowed_tags = allowed_tags
        self.found: list[str] = []
        self.frames: list[dict[str, str | None]] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "script":
            # Only the site's own scripts, loaded from its paths; nothing inline.
            src = attributes.get("src") or ""
            if not (src.startswith("/") and not src.startswith("//")):
                self.found.append(f"<script {attrs}>")
            self._in_script = True
        elif tag in ACTIVE_TAGS and tag not in self.allowed_tags:
            self.found.append(f"<{tag}>")
        if tag == "iframe":
            self.frames.append(attributes)
        href = attributes.get("href") or ""
        own = href.startswith("/") and not href.startswith("//")
        if tag == "link" and not (attributes.get("rel") in ("stylesheet", "icon") and own):
            # The site's own stylesheet and icon only: any other link could load or prefetch a payload.
            self.found.append(f"<link {attrs}>")
        if tag == "meta" and "http-equiv" in attributes:
            self.found.append(f"<meta {attrs}>")
        for name, value in attrs:
            if name.startswith("on") or (name in URL_ATTRIBUTES and value and _is_script_url(value)):
                self.found.append(f"<{tag} {name}={value!r}>")
            elif name == "style" and value and re.search(r"expression\(|javascript:|url\(", value, re.I):
                self.found.append(f"<{tag} style={value!r}>")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        self._in_script = False

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.found.append(f"inline script {data[:40]!r}")


def active_content(html: str, page_tags: set[str] = PAGE_TAGS) -> ActiveContent:
    parser = ActiveContent(page_tags)
    parser.feed(html)
    parser.close()
    return parser


def assert_nothing_runs(html: str, page_tags: set[str] = PAGE_TAGS, baseline: str = "") -> list[dict]:
    """Fail on anything active in ``html``; check each iframe's srcdoc as a sandboxed document of its own.

    With ``baseline`` (the same page showing a harmless template), only what the payload added counts:
    the admin has icons and scripts of its own.
    """
    parser = active_content(html, page_tags)
    expected = Counter(active_content(baseline, page_tags).found) if baseline else Counter()
    assert Counter(parser.found) - expected == Counter()
    # Byte-level too: a browser ends "<!-->" at once, where Python's parser would read a comment on.
    raw_scripts = [tag for tag in re.findall(r"<script\b[^>]*>", html, re.I) if not re.search(r'\ssrc="/(?!/)', tag)]
    assert raw_scripts == []
    for frame in parser.frames:
        assert frame.get("sandbox") == "", f"an iframe without an empty sandbox: {frame}"
        assert "src" not in frame, "a preview frame loads nothing but its srcdoc"
        assert_nothing_runs(frame.get("srcdoc") or "", page_tags=set())
    return parser.frames


@pytest.mark.parametrize("payload", HTML_PAYLOADS[1:])
def test_the_checker_catches_each_payload_left_raw(payload):
    with pytest.raises(AssertionError):
        assert_nothing_runs(payload, page_tags=set())


@pytest.fixture
def editor(client):
    client.force_login(User.objects.get(username="editor"))
    return client


@pytest.fixture
def saved(editor) -> TemplateVersion:
    """The payloads saved by the editor into the English email template of `shipped` (v2, a draft)."""
    form = {"kind": "shipped", "language": "en", "channel": "email", "subject": SUBJECT, "text_body": TEXT,
            "html_body": HTML}  # fmt: skip
    response = editor.post("/templates/save/", form)
    assert response.status_code == 302
    return TemplateVersion.objects.get(kind__name="shipped", language="en", channel="email", version=2)


def test_the_stored_html_body_is_sanitized(saved):
    stored = saved.html_body.lower()
    for needle in ("<script", "javascript", "onerror", "onclick", "onload", "<svg", "<animate", "<set", "<img",
                   "<iframe", "<math", "<style", "<form", "data:text", "xlink:"):  # fmt: skip
        assert needle not in stored, needle
    assert '<p dir="ltr" lang="en">kept: <b>bold</b>, <a href="https://example.com/t/{{ order }}">' in saved.html_body


def test_the_editor_page_of_the_saved_version_shows_it_inert(editor, saved):
    page = editor.get(f"/templates/{saved.pk}/").content.decode()
    [frame] = assert_nothing_runs(page)
    assert frame["srcdoc"].startswith('<!DOCTYPE html>\n<html lang="en" dir="ltr">')
    assert 'sandbox="" srcdoc="&lt;!DOCTYPE html&gt;' in page  # escaped in the attribute, never raw
    assert "allow-scripts" not in page
    assert "<script>alert" not in page


def test_the_live_preview_of_unsaved_payloads_is_inert(editor):
    form = {"kind": "shipped", "language": "en", "channel": "email", "subject": SUBJECT, "text_body": TEXT,
            "html_body": HTML}  # fmt: skip
    partial = editor.post("/templates/preview/", form, HTTP_HX_REQUEST="true").content.decode()
    [frame] = assert_nothing_runs(partial)
    assert "Order 5012" in frame["srcdoc"]
    assert "Saving cleans the HTML body" in partial
    whole = editor.post("/templates/preview/", form).content.decode()  # the page without JavaScript
    assert_nothing_runs(whole)


def test_the_list_and_the_arabic_editor_stay_inert(editor, saved):
    assert_nothing_runs(editor.get("/templates/").content.decode())
    form = {"kind": "shipped", "language": "ar", "channel": "email", "subject": "تم {{ order }}", "text_body": "نص",
            "html_body": HTML}  # fmt: skip
    assert_nothing_runs(editor.post("/templates/preview/", form).content.decode())


@pytest.mark.parametrize("username", ["editor", "admin"])
def test_the_admin_change_page_shows_it_inert(client, editor, saved, username):
    harmless = editor.post("/templates/save/", {"kind": "shipped", "language": "ur", "channel": "email",
                                                "subject": "s", "text_body": "t", "html_body": "<p>h</p>"})  # fmt: skip
    assert harmless.status_code == 302
    baseline_pk = TemplateVersion.objects.get(kind__name="shipped", language="ur", channel="email").pk
    client.force_login(User.objects.get(username=username))
    response = client.get(f"/admin/notifications/templateversion/{saved.pk}/change/")
    assert response.status_code == 200
    baseline = client.get(f"/admin/notifications/templateversion/{baseline_pk}/change/").content.decode()
    assert_nothing_runs(response.content.decode(), baseline=baseline)
    assert "&lt;script&gt;alert(&#x27;subject&#x27;)&lt;/script&gt;" in response.content.decode()


def test_the_mail_really_sent_carries_no_script(client, saved, send, smtp_sink):
    client.force_login(User.objects.get(username="approver"))
    assert client.post(f"/templates/{saved.pk}/approve/", {"content_hash": saved.content_hash}).status_code == 302
    # A param carries a payload too: escaped in HTML like any param (the kind allows it that long here).
    Kind.objects.filter(name="shipped").update(params={"order": {"example": "5012", "max_length": 100}})
    response = send({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "<svg onload=alert(22)>"}})
    assert response.status_code == 202, response.json()
    notification = Notification.objects.get(pk=response.json()["id"])
    assert notification.template_version_id == saved.pk
    dispatch.deliver(str(notification.pk))

    [mail] = smtp_sink.messages()
    html = mail.get_body(("html",)).get_content().replace("\r\n", "\n")
    assert html.startswith('<!DOCTYPE html>\n<html lang="en" dir="ltr">')
    assert_nothing_runs(html, page_tags=set())
    assert "&lt;svg onload=alert(22)&gt;" in html
    assert mail["Subject"] == "Order <svg onload=alert(22)> <script>alert('subject')</script>"  # a header: text
    assert mail.get_body(("plain",)).get_content().startswith("Order <svg onload=alert(22)> <script>")  # text/plain
