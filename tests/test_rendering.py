"""Sandboxed template rendering, language fallback and HTML sanitizing."""

import pytest

from backend.notifications import rendering
from backend.notifications.models import Kind, TemplateVersion
from backend.notifications.rendering import RenderError


def version(**fields) -> TemplateVersion:
    base = {"language": "en", "channel": "email", "subject": "", "text_body": "", "html_body": ""}
    return TemplateVersion(**{**base, **fields})


def test_it_names_every_missing_param_at_once():
    v = version(subject="Order {{ order }}", text_body="Hi {{ name }}, {{ order }}", html_body="<p>{{ total }}</p>")
    with pytest.raises(RenderError) as exc:
        rendering.render(v, {})
    assert exc.value.missing == ["name", "order", "total"]
    assert str(exc.value) == "missing params: name, order, total"


def test_default_and_if_make_a_param_optional():
    v = version(text_body="Track at {{ url|default('your account') }}.{% if note %} {{ note }}{% endif %}")
    assert rendering.render(v, {}).text == "Track at your account."


def test_a_missing_param_used_in_arithmetic_is_named():
    with pytest.raises(RenderError) as exc:
        rendering.render(version(text_body="{{ total + 1 }}"), {})
    assert exc.value.missing == ["total"]


@pytest.mark.parametrize(
    "source",
    [
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ params.__init__.__globals__ }}",
        "{% include 'settings.py' %}",
        "{{ x.__class__ }}",
    ],
)
def test_the_sandbox_reaches_no_python_object_or_file(source):
    with pytest.raises(RenderError) as exc:
        rendering.render(version(text_body=source), {"params": {}, "x": "s"})
    assert str(exc.value).startswith("template error:")


def test_a_syntax_error_is_a_render_error():
    with pytest.raises(RenderError, match="template error: Unexpected end of template"):
        rendering.render(version(text_body="{% if x %}"), {"x": 1})


def test_params_are_escaped_in_html_but_not_in_text():
    v = version(subject="{{ name }}", text_body="{{ name }}", html_body="<p>{{ name }}</p>")
    out = rendering.render(v, {"name": "<script>alert(1)</script> & co"})
    assert out.text == "<script>alert(1)</script> & co"
    assert "<p>&lt;script&gt;alert(1)&lt;/script&gt; &amp; co</p>" in out.html


def test_arabic_email_document_is_right_to_left():
    out = rendering.render(version(language="ar", subject="مرحبا", text_body="t", html_body="<p>مرحبا</p>"), {})
    assert out.html.startswith('<!DOCTYPE html>\n<html lang="ar" dir="rtl">')
    assert '<body dir="rtl"' in out.html


@pytest.mark.parametrize(("language", "direction"), [("ar", "rtl"), ("fa", "rtl"), ("he", "rtl"), ("ur", "rtl"),
                                                     ("en", "ltr"), ("fr", "ltr"), ("ar-EG", "rtl")])  # fmt: skip
def test_text_direction(language, direction):
    from backend.notifications.locales import text_direction

    assert text_direction(language) == direction


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ('<p dir="rtl" lang="ar">نص</p>', '<p dir="rtl" lang="ar">نص</p>'),
        ("<script>steal()</script><b>hi</b>", "<b>hi</b>"),  # the script's content goes too
        ('<a href="javascript:alert(1)">x</a>', "<a>x</a>"),
        ('<a href="&#106;avascript:alert(1)">x</a>', "<a>x</a>"),
        ('<a href="https://example.com" onclick="x()">x</a>', '<a href="https://example.com">x</a>'),
        ('<svg><animate attributeName="href" values="javascript:alert(1)"/></svg>', ""),
        ('<img src="x" onerror="alert(1)">', ""),
    ],
)
def test_author_html_is_sanitized_keeping_direction(dirty, clean):
    assert rendering.sanitize_html(dirty) == clean


def test_select_version_prefers_the_language_then_the_default(db):
    kind = Kind.objects.create(name="k", category="transactional", channels=["email"], default_language="en")
    en = TemplateVersion.objects.create(kind=kind, language="en", channel="email", text_body="en", status="approved")
    TemplateVersion.objects.create(kind=kind, language="ar", channel="email", version=1, text_body="ar1",
                                   status="approved")  # fmt: skip
    ar2 = TemplateVersion.objects.create(kind=kind, language="ar", channel="email", version=2, text_body="ar2",
                                         status="approved")  # fmt: skip
    TemplateVersion.objects.create(kind=kind, language="ar", channel="email", version=3, text_body="draft")
    assert rendering.select_version(kind, "email", "ar") == ar2
    assert rendering.select_version(kind, "email", "fa") == en
    assert rendering.select_version(kind, "sms", "en") is None


@pytest.mark.parametrize(
    ("text", "required"),
    [
        pytest.param("Order {{ order }} shipped.", ["order"], id="printed"),
        pytest.param("Track at {{ url|default('your account') }}.", [], id="a-default-makes-it-optional"),
        pytest.param("{% if url %}Track at {{ url }}.{% endif %}", [], id="only-tested-then-printed-when-given"),
        pytest.param("{% for item in items %}- {{ item }}\n{% endfor %}{{ count }}", ["count", "items"], id="iterated"),
        pytest.param("{{ total + 1 }} items", ["total"], id="computed"),
        pytest.param("Order {{ order|upper }}", ["order"], id="filtered"),
        pytest.param("No params at all.", [], id="none"),
    ],
)
def test_required_params_are_those_used_without_a_default(text, required):
    assert rendering.required_params(version(text_body=text)) == required


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("text", "required"),
    [
        pytest.param("{% if order %}Track at {{ url }}.{% endif %}", ["url"], id="in-a-branch-a-declared-param-takes"),
        pytest.param("{% if express %}Track at {{ url }}.{% endif %}", [], id="in-a-branch-no-declared-param-takes"),
        pytest.param("{% if order %}{{ url|default('') }}{% endif %}{{ order }}", ["order"], id="a-default-still"),
    ],
)
def test_a_param_in_a_branch_the_declared_params_take_is_required(text, required):
    """``order`` is declared, with an example: every caller sends it, so the branch it opens is always taken."""
    declared = {"order": {"example": "5012"}}
    kind = Kind.objects.create(name="k", category="transactional", channels=["sms"], params=declared)
    assert rendering.required_params(version(kind=kind, channel="sms", text_body=text)) == required


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("https://\u202emoc.knab-ruoy", "U+202E (right-to-left override)", id="rlo"),
        pytest.param("\u202dabc", "U+202D (left-to-right override)", id="lro"),
        pytest.param("سفارش \u2066ABC-12\u2069 ارسال شد", "", id="isolates-are-fine"),
        pytest.param("\u202bمرحبا\u202c \u200f", "", id="embeddings-and-marks-are-fine"),
        pytest.param("a\x00b", "Text may not contain NUL characters.", id="nul-as-before"),
    ],
)
def test_a_message_may_not_carry_a_bidi_override(text, problem):
    found = rendering.message_text_problem(text)
    assert (problem in found) if problem else found == ""
    assert rendering.text_problem(text) == ("" if "\x00" not in text else problem)  # storable all the same


@pytest.mark.parametrize(
    "text_body",
    [
        pytest.param('Pay at {{ "\\u202e" }}moc.knab-ruoy{{ "\\u202c" }}', id="a-string-escape"),
        pytest.param('Pay at {{ "%c"|format(8238) }}moc.knab-ruoy', id="format-of-its-code-point"),
    ],
)
def test_a_template_that_renders_an_override_does_not_render(text_body):
    with pytest.raises(RenderError, match=r"U\+202E \(right-to-left override\)") as exc:
        rendering.render(version(channel="sms", text_body=text_body), {})
    assert not exc.value.caused_by_params


def test_a_params_override_is_stripped_before_it_is_inserted():
    rendered = rendering.render(version(channel="sms", text_body="{{ name }} invited you"), {"name": "\u202eevil"})
    assert rendered.text == "evil invited you"
