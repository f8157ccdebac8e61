"""The staff template editor: who may see, save and approve; the live SMS figures it shows; errors as errors."""

import re
import time

import pytest
from django.contrib.auth.models import User

from backend.notifications import actions
from backend.notifications.models import Kind, TemplateVersion
from frontend.editor import forms, preview, worker

pytestmark = pytest.mark.usefixtures("demo_data")

PREVIEW = "/templates/preview/"
SAVE = "/templates/save/"
HTMX = {"HTTP_HX_REQUEST": "true"}


# --- logged-in clients for the personas of tests/conftest.py ---------------------------------------------------------


@pytest.fixture
def as_editor(client, editor):
    client.force_login(editor)
    return client


@pytest.fixture
def as_approver(client, approver):
    client.force_login(approver)
    return client


def a_draft(author, text="Your order {{ order }} is packed.", language="en", channel="sms") -> TemplateVersion:
    """A draft saved the way the editor saves it."""
    kind = Kind.objects.get(name="shipped")
    return actions.save_template_draft(kind, language, channel, author, text_body=text)


def sms_form(text: str, kind="otp", language="en", country="SA", audience=1000, **extra) -> dict:
    return {"kind": kind, "language": language, "channel": "sms", "text_body": text, "country": country,
            "audience": str(audience), **extra}  # fmt: skip


def figure(response, element_id: str) -> str:
    """The text of the element with this id in an HTML answer."""
    found = re.search(rf'id="{element_id}"[^>]*>([^<]*)<', response.content.decode())
    assert found, f"no #{element_id} in the answer"
    return found.group(1).strip()


# --- who may do what ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", ["/templates/", "/templates/edit/?kind=otp&language=en&channel=sms"])
def test_an_anonymous_visitor_is_sent_to_the_admin_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=/templates/")


def test_an_anonymous_htmx_request_redirects_the_whole_page_to_the_login(client):
    response = client.post(PREVIEW, sms_form("hi"), HTTP_HX_CURRENT_URL="http://testserver/templates/edit/", **HTMX)
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/admin/login/?next=/templates/edit/"


@pytest.mark.parametrize(
    ("method", "url"),
    [("get", "/templates/"), ("get", "/templates/edit/"), ("post", PREVIEW), ("post", SAVE)],
)
def test_an_outsider_is_refused(client, outsider, method, url):
    client.force_login(outsider)
    response = getattr(client, method)(url, sms_form("hi") if method == "post" else None)
    assert response.status_code == 403


def test_an_outsider_cannot_approve(client, outsider, editor):
    draft = a_draft(editor)
    client.force_login(outsider)
    assert client.post(f"/templates/{draft.pk}/approve/", {"content_hash": draft.content_hash}).status_code == 403
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


def test_an_approver_may_look_but_not_save(as_approver):
    page = as_approver.get("/templates/edit/?kind=shipped&language=en&channel=sms")
    assert page.status_code == 200
    assert 'id="tpl-save"' not in page.content.decode()
    assert " readonly" in page.content.decode()
    count = TemplateVersion.objects.count()
    assert as_approver.post(SAVE, sms_form("Changed {{ code }}")).status_code == 403
    assert TemplateVersion.objects.count() == count


def test_pages_only_answer_their_method(as_editor):
    assert as_editor.get(PREVIEW).status_code == 405
    assert as_editor.get(SAVE).status_code == 405
    assert as_editor.post("/templates/").status_code == 405


# --- the list -------------------------------------------------------------------------------------------------------


def test_the_list_shows_each_template_with_its_live_version_and_drafts(as_editor, editor):
    draft = a_draft(editor)
    page = as_editor.get("/templates/").content.decode()
    row = re.search(r"<tr>\s*<td><a[^>]*>shipped</a></td>\s*<td>en</td><td>sms</td>(.*?)</tr>", page, re.S).group(1)
    assert "v1" in row  # sent now
    assert (
        f'href="/templates/{draft.pk}/">v2</a> <span class="tpl-status tpl-status--draft">draft, awaiting approval'
        in row
    )


def test_the_list_costs_the_same_queries_however_many_versions(as_editor, editor, django_assert_num_queries):
    as_editor.get("/templates/")  # warm the session and permission caches of this process
    with django_assert_num_queries(7) as few:
        as_editor.get("/templates/")
    for number in range(10):
        a_draft(editor, text=f"Draft {number} {{{{ order }}}}", language="fa")
    with django_assert_num_queries(len(few.captured_queries)):
        as_editor.get("/templates/")


def test_the_list_filters_with_a_partial_for_htmx(as_editor):
    response = as_editor.get("/templates/?kind=otp&channel=sms", **HTMX)
    body = response.content.decode()
    assert "<html" not in body
    assert ">otp</a>" in body and ">shipped</a>" not in body
    assert "HX-Request" in response["Vary"]
    assert "<html" in as_editor.get("/templates/?kind=otp").content.decode()


# --- the editor page ------------------------------------------------------------------------------------------------


def test_the_editor_opens_the_newest_version_of_the_template(as_editor, editor):
    a_draft(editor, text="Version two: {{ order }}")
    page = as_editor.get("/templates/edit/?kind=shipped&language=en&channel=sms").content.decode()
    assert "Version two: {{ order }}</textarea>" in page
    assert "Editing from <strong>v2</strong>" in page
    assert "Saving makes a new draft, v3" in page


@pytest.mark.parametrize("language", ["ar", "fa", "he", "ur"])
def test_the_editor_and_its_previews_turn_right_to_left(as_editor, language):
    page = as_editor.get(f"/templates/edit/?kind=shipped&language={language}&channel=sms").content.decode()
    assert re.search(r'<textarea id="id_text_body"[^>]* dir="rtl" lang="' + language, page)
    assert '<figure class="tpl-phone" dir="rtl"' in page
    push = as_editor.get(f"/templates/edit/?kind=shipped&language={language}&channel=push").content.decode()
    assert re.search(r'<input id="id_subject"[^>]* dir="rtl"', push)
    assert 'id="push-card" dir="rtl"' in push
    email_form = {"kind": "otp", "language": language, "channel": "email", "subject": "رمز", "text_body": "{{ code }}",
                  "html_body": "<p>{{ code }}</p>"}  # fmt: skip
    email = as_editor.post(PREVIEW, email_form).content.decode()  # the whole page, as without JavaScript
    assert re.search(r'<input id="id_subject"[^>]* dir="rtl"', email)
    assert re.search(r'<iframe [^>]*id="email-html" sandbox="" srcdoc="[^"]*" [^>]*dir="rtl"', email)
    # The HTML source is markup, shown left to right like code (its tags would come out reversed in RTL).
    assert re.search(r'<textarea id="id_html_body"[^>]* dir="ltr" lang="' + language, email)
    assert re.search(r'<pre class="tpl-plain" id="email-text" dir="rtl"', email)


def test_an_english_template_stays_left_to_right(as_editor):
    page = as_editor.get("/templates/edit/?kind=shipped&language=en&channel=sms").content.decode()
    assert re.search(r'<textarea id="id_text_body"[^>]* dir="ltr"', page)


def test_the_arabic_email_preview_renders_the_document_with_lang_and_dir(as_editor):
    page = as_editor.get("/templates/edit/?kind=shipped&language=ar&channel=email").content.decode()
    srcdoc = re.search(r'<iframe [^>]*srcdoc="([^"]*)"', page).group(1)
    assert "&lt;html lang=&quot;ar&quot; dir=&quot;rtl&quot;&gt;" in srcdoc
    assert "&lt;bdi&gt;5012&lt;/bdi&gt;" in srcdoc
    # The preview shows the text part as sent: the inserted order number between U+2068 and U+2069.
    assert 'id="email-text" dir="rtl" lang="ar">خبر سار: طلبك رقم \u20685012\u2069 في الطريق إليك.</pre>' in page
    assert 'id="email-isolation"' in page


# --- saving ---------------------------------------------------------------------------------------------------------


def test_an_editor_saves_a_new_draft_with_the_next_number(as_editor, editor):
    live = TemplateVersion.objects.get(kind__name="shipped", language="ar", channel="email", version=1)
    response = as_editor.post(SAVE, {
        "kind": "shipped", "language": "ar", "channel": "email", "subject": "تم شحن {{ order }}",
        "text_body": "طلبك {{ order }}\r\nفي الطريق.",
        "html_body": '<p dir="rtl" onclick="x()">طلبك <bdi>{{ order }}</bdi></p>',
    })  # fmt: skip
    saved = TemplateVersion.objects.get(kind__name="shipped", language="ar", channel="email", version=2)
    assert response.status_code == 302
    assert response["Location"] == f"/templates/{saved.pk}/"
    assert (saved.status, saved.created_by, saved.approved_by) == ("draft", editor, None)
    assert saved.text_body == "طلبك {{ order }}\nفي الطريق."  # the browser's CRLF made LF
    assert saved.html_body == '<p dir="rtl">طلبك <bdi>{{ order }}</bdi></p>'  # sanitized, dir kept
    live.refresh_from_db()
    assert (live.status, live.subject) == ("approved", "تم شحن طلبك رقم {{ order }}")
    page = as_editor.get(response["Location"]).content.decode()
    assert "Saved shipped/ar/email v2 as a draft." in page


def test_saving_from_an_approved_version_never_changes_it(as_editor):
    live = TemplateVersion.objects.get(kind__name="otp", language="en", channel="sms", version=1)
    as_editor.post(SAVE, sms_form("Code: {{ code }}", base=str(live.pk)))
    as_editor.post(SAVE, sms_form("Your code: {{ code }}", base=str(live.pk)))
    versions = TemplateVersion.objects.filter(kind__name="otp", language="en", channel="sms").order_by("version")
    assert [(v.version, v.status, v.text_body) for v in versions] == [
        (1, "approved", "Your code is {{ code }}. It expires in 5 minutes."),
        (2, "draft", "Code: {{ code }}"),
        (3, "draft", "Your code: {{ code }}"),
    ]


def test_an_sms_keeps_no_subject_or_html_whatever_the_form_sent(as_editor):
    as_editor.post(SAVE, sms_form("Code {{ code }}", subject="stale", html_body="<p>stale</p>"))
    saved = TemplateVersion.objects.get(kind__name="otp", language="en", channel="sms", version=2)
    assert (saved.subject, saved.html_body) == ("", "")


def test_saving_without_text_is_refused_with_the_reason(as_editor):
    response = as_editor.post(SAVE, sms_form("   "))
    assert response.status_code == 400
    assert "Text: Write the text: it is the SMS or push text" in response.content.decode()
    assert not TemplateVersion.objects.filter(kind__name="otp", language="en", channel="sms", version=2).exists()


def test_a_tampered_template_name_is_a_400(as_editor):
    response = as_editor.post(SAVE, sms_form("x", kind="no-such-kind"))
    assert response.status_code == 400
    assert response.content.decode().startswith("Not a template: kind:")


@pytest.mark.parametrize("base", ["²", "٣", "x", ""])
def test_a_base_that_is_not_a_version_number_previews_without_one(as_editor, base):
    response = as_editor.post(PREVIEW, sms_form("Your code is {{ code }}", base=base), HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response.context["base"] is None


# --- approving ------------------------------------------------------------------------------------------------------


def approve(client, version: TemplateVersion, shown_hash: str | None = None):
    """POST the approve form as the page sends it: naming the content hash it showed."""
    return client.post(f"/templates/{version.pk}/approve/", {"content_hash": shown_hash or version.content_hash})


def approve_button(page: str) -> str | None:
    """The content hash the page's approve form carries, or None when the page shows no approve button."""
    found = re.search(r'<form method="post" action="/templates/\d+/approve/".*?</form>', page, re.S)
    if not found:
        return None
    return re.search(r'name="content_hash" value="([0-9a-f]{64})"', found.group(0)).group(1)


def test_an_approver_approves_someone_elses_draft(as_approver, approver, editor):
    draft = a_draft(editor)
    page = as_approver.get(f"/templates/{draft.pk}/").content.decode()
    assert "Approve v2</button>" in page
    assert approve_button(page) == draft.content_hash
    response = approve(as_approver, draft)
    assert response.status_code == 302
    draft.refresh_from_db()
    assert (draft.status, draft.approved_by) == ("approved", approver)
    assert "Approved shipped/en/sms v2." in as_approver.get(response["Location"]).content.decode()


def test_approving_other_content_than_the_version_holds_is_a_409(as_approver, editor):
    draft = a_draft(editor)
    shown = preview.Draft(draft.kind, "en", "sms", text_body="Your order {{ order }} is lost.").as_version()
    response = approve(as_approver, draft, shown.compute_content_hash())
    assert response.status_code == 409
    assert (
        '<p class="tpl-error" role="alert" id="tpl-refused">shipped/en/sms v2 is not the text you were shown'
        in response.content.decode()
    )
    assert "open it again, read it, and approve what it says now." in response.content.decode()
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


@pytest.mark.parametrize("sent", [{}, {"content_hash": "not a hash"}])
def test_an_approval_that_names_no_content_hash_is_a_400(as_approver, editor, sent):
    draft = a_draft(editor)
    response = as_approver.post(f"/templates/{draft.pk}/approve/", sent)
    assert response.status_code == 400
    assert "The approval names no content hash: approve from the version&#x27;s page." in response.content.decode()
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


@pytest.mark.parametrize(
    ("viewer", "author", "text", "shown"),
    [
        ("approver", "editor", "Your order {{ order }} is packed.", True),
        ("admin", "editor", "Your order {{ order }} is packed.", True),
        ("approver", "approver", "Your order {{ order }} is packed.", False),  # never one's own
        ("admin", "admin", "Your order {{ order }} is packed.", False),  # not even with every right
        ("editor", "approver", "Your order {{ order }} is packed.", False),  # no approve permission
        ("approver", "editor", "Your order {{ order }} {{ surprise }}", False),  # does not render
    ],
)
def test_the_approve_button_is_shown_only_to_who_may_approve_a_draft_that_renders(
    client, editor, viewer, author, text, shown
):
    draft = a_draft(User.objects.get(username=author), text=text)
    client.force_login(User.objects.get(username=viewer))
    page = client.get(f"/templates/{draft.pk}/")
    assert page.status_code == 200
    assert approve_button(page.content.decode()) == (draft.content_hash if shown else None)


def test_no_approve_button_on_an_approved_version_or_for_an_outsider(as_approver, outsider, client):
    live = TemplateVersion.objects.get(kind__name="shipped", language="en", channel="sms", version=1)
    assert approve_button(as_approver.get(f"/templates/{live.pk}/").content.decode()) is None
    client.force_login(outsider)
    assert client.get(f"/templates/{live.pk}/").status_code == 403


def test_no_approve_button_beside_text_the_draft_does_not_hold(as_approver, editor):
    """The page without JavaScript shows typed text with the draft as its base: approving would not cover it."""
    draft = a_draft(editor)
    form = sms_form("Your order {{ order }} is lost.", kind="shipped", base=str(draft.pk))
    page = as_approver.post(PREVIEW, form).content.decode()
    assert "Your order 5012 is lost." in page
    assert approve_button(page) is None


def test_it_refuses_self_approval_with_the_reason_shown(as_approver, approver):
    own = a_draft(approver)
    response = approve(as_approver, own)
    assert response.status_code == 403
    assert (
        '<p class="tpl-error" role="alert" id="tpl-refused">shipped/en/sms v2 was written by approver: '
        "a second person must approve it.</p>" in response.content.decode()
    )
    assert TemplateVersion.objects.get(pk=own.pk).status == "draft"


def test_an_editor_cannot_approve(as_editor, approver):
    draft = a_draft(approver)
    page = as_editor.get(f"/templates/{draft.pk}/").content.decode()
    assert "Approve v2" not in page
    response = approve(as_editor, draft)
    assert response.status_code == 403
    assert "editor may not approve templates." in response.content.decode()
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


# --- the live SMS figures -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "encoding", "used", "left", "segments"),
    [
        ("a" * 160, "GSM-7", 160, 0, 1),
        ("a" * 161, "GSM-7", 8, 145, 2),  # 153 + 8
        ("€" * 80, "GSM-7", 160, 0, 1),  # extension characters: 2 septets each
        ("]" * 153, "GSM-7", 2, 151, 3),  # an escape never straddles two parts: 76 + 76 + 1 characters
        ("Ça coûte 5 £, ¿vale?", "UCS-2", 20, 50, 1),  # û is not GSM-7 (Ç, £, ¿ are)
        ("a" * 306, "GSM-7", 153, 0, 2),
        ("a" * 307, "GSM-7", 1, 152, 3),
        ("ب" * 70, "UCS-2", 70, 0, 1),
        ("ب" * 71, "UCS-2", 4, 63, 2),  # 67 + 4
        ("😀" * 35, "UCS-2", 70, 0, 1),  # surrogate pairs: 2 units each
        ("Order shipped – thanks" + "!" * 60, "UCS-2", 15, 52, 2),  # one en dash: 82 units
        ("`", "UCS-2", 1, 69, 1),  # the backtick is not GSM-7
    ],
)
def test_the_pricing_partial_gives_the_exact_segments(as_editor, text, encoding, used, left, segments):
    response = as_editor.post(PREVIEW, sms_form(text), **HTMX)
    assert response.status_code == 200
    assert (figure(response, "sms-encoding"), figure(response, "sms-segments")) == (encoding, str(segments))
    assert (figure(response, "sms-units-used"), figure(response, "sms-units-left")) == (str(used), str(left))
    # Saudi Arabia, primary provider twilio: 0.0450 a segment; vonage 0.0420 is listed too.
    assert figure(response, "sms-price") == f"{0.045 * segments:.4f}"
    assert f"<span>{0.042 * segments:.4f}</span>" in response.content.decode()


def test_the_price_follows_the_country_and_the_audience(as_editor):
    response = as_editor.post(PREVIEW, sms_form("a" * 161, country="US", audience=250000), **HTMX)
    assert figure(response, "sms-price") == "0.0158"  # 2 × 0.0079
    assert figure(response, "sms-audience-price") == "3,950.0000"  # 2 × 0.0079 × 250,000
    assert "250,000 recipients" in response.content.decode()


def test_a_bad_audience_is_an_error_in_the_panel(as_editor):
    response = as_editor.post(PREVIEW, sms_form("hi", audience=0), **HTMX)
    assert response.status_code == 200
    assert "Audience size: Ensure this value is greater than or equal to 1." in response.content.decode()
    assert figure(response, "sms-segments") == "1"


def test_an_over_long_text_is_refused_but_the_panel_still_answers(as_editor):
    response = as_editor.post(PREVIEW, sms_form("a" * 20_001), **HTMX)
    assert response.status_code == 200
    assert "Text: Ensure this value has at most 20000 characters (it has 20001)." in response.content.decode()
    assert figure(response, "sms-segments") == "131"  # the first 20,000: 131 parts of 153


def test_the_worst_case_fills_each_param_to_its_max_length_with_escape_characters(as_editor):
    # order: example "5012", max_length 12. 140 + 4 = 144 septets; 140 + 12 × 2 (€) = 164 → 2 segments
    # ('X' would give 152, one segment: it would hide the second one).
    response = as_editor.post(PREVIEW, sms_form("x" * 140 + "{{ order }}", kind="shipped"), **HTMX)
    assert (figure(response, "sms-segments"), figure(response, "sms-worst-segments")) == ("1", "2")
    assert figure(response, "sms-worst-encoding") == "GSM-7"
    assert (figure(response, "sms-example-price"), figure(response, "sms-worst-price")) == ("0.0450", "0.0900")
    assert figure(response, "sms-worst-audience-price") == "90.0000"
    # A param with an emoji or in Arabic would make it UCS-2: 140 + 24 units → 3 parts of 67.
    assert figure(response, "sms-flipped-segments") == "3"


def test_the_worst_case_of_a_ucs2_template_counts_surrogate_pairs(as_editor):
    # 50 + 4 = 54 units; 50 + 12 × 2 (😀, a surrogate pair) = 74 → 2 segments; one-unit letters would give 62.
    response = as_editor.post(PREVIEW, sms_form("ا" * 50 + "{{ order }}", kind="shipped", language="ar"), **HTMX)
    assert (figure(response, "sms-segments"), figure(response, "sms-worst-segments")) == ("1", "2")
    assert figure(response, "sms-worst-encoding") == "UCS-2"
    assert 'id="sms-flipped-segments"' not in response.content.decode()


def test_worst_params_come_from_the_kind():
    kind = Kind.objects.get(name="digest")
    assert preview.worst_params(kind, "€") == {"items": ["€" * 2000], "count": "€€€€"}
    kind.params = {"name": {"example": "Sam"}}
    assert preview.worst_params(kind, "€") == {"name": "Sam"}
    assert preview.unbounded_params(kind) == ["name"]


# --- the look-alike fix ---------------------------------------------------------------------------------------------

DASHED = "Your order {{ order }} has shipped – it arrives tomorrow. Track it in the app any time you like."


def test_each_character_forcing_ucs2_is_marked_in_place_with_its_fix(as_editor):
    response = as_editor.post(PREVIEW, sms_form(DASHED, kind="shipped"), **HTMX)
    body = response.content.decode()
    assert (figure(response, "sms-encoding"), figure(response, "sms-segments")) == ("UCS-2", "2")
    assert '<div id="tpl-ucs2" hx-swap-oob="innerHTML">' in body
    assert (
        '<div class="tpl-mirror" dir="ltr" lang="en">Your order {{ order }} has shipped <button type="submit" '
        'class="tpl-mark tpl-mark--fix" name="fix" value="35:2013"' in body
    )
    assert "en dash (U+2013) forces UCS-2: replace it with &#x27;-&#x27;" in body


def test_one_click_on_the_fix_brings_two_segments_back_to_one(as_editor):
    response = as_editor.post(PREVIEW, sms_form(DASHED, kind="shipped", fix="35:2013"), **HTMX)
    body = response.content.decode()
    assert (figure(response, "sms-encoding"), figure(response, "sms-segments")) == ("GSM-7", "1")
    fixed = DASHED.replace("–", "-")
    assert f'hx-swap-oob="true">\n{fixed}</textarea>' in body  # the textarea comes back fixed
    assert 'class="tpl-mirror"' not in body


def test_a_stale_fix_changes_nothing(as_editor):
    response = as_editor.post(PREVIEW, sms_form(DASHED, kind="shipped", fix="34:2013"), **HTMX)
    assert figure(response, "sms-segments") == "2"
    assert f"\n{DASHED}</textarea>" in response.content.decode()


def test_fix_all_replaces_every_look_alike_and_keeps_the_rest(as_editor):
    text = "“Hi”\u00a0— ça va…"
    response = as_editor.post(PREVIEW, sms_form(text, fix="all"), **HTMX)
    assert "\n&quot;Hi&quot; - ça va...</textarea>" in response.content.decode()
    assert figure(response, "sms-encoding") == "UCS-2"  # ç has no look-alike (Ç would change the word)
    assert "1 character has no GSM-7 look-alike" in response.content.decode()


def test_in_a_persian_text_a_look_alike_is_not_said_to_force_ucs2(as_editor):
    """The letters need UCS-2 whatever the dash is: replacing it changes neither encoding nor price."""
    response = as_editor.post(PREVIEW, sms_form("سفارش {{ order }} ارسال شد — فردا می‌رسد.", kind="shipped"), **HTMX)
    body = response.content.decode()
    assert "forces UCS-2" not in body
    assert "em dash (U+2014): replace it with &#x27;-&#x27;; the message stays UCS-2 for the characters" in body
    assert "1 character has a GSM-7 look-alike</strong>, but replacing it saves nothing while the message" in body


def test_an_approver_sees_the_marks_but_no_fix_buttons(as_approver):
    response = as_approver.post(PREVIEW, sms_form(DASHED, kind="shipped", fix="35:2013"), **HTMX)
    assert figure(response, "sms-segments") == "2"
    assert 'name="fix"' not in response.content.decode()


# --- errors are errors, not 500s ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Hello {{ order ", "Template error.</strong>\n  template error: unexpected end of template"),
        ("Hello {{ nobody }} and {{ nothing }}", "Missing params.</strong>\n  missing params: nobody, nothing"),
        ("{{ order|no_such_filter }}", "template error: No filter named &#x27;no_such_filter&#x27;."),
        ("{{ ''.__class__.__mro__ }}", "Template error.</strong>"),
        ("{% for i in range(10**9) %}x{% endfor %}", "template error: range() of 10,000 numbers at most"),
        ("{{ 'A' * 10**9 }}", "template error: a repetition with * would make 1,000,000,000 characters"),
    ],
)
def test_a_broken_template_shows_an_error_not_a_500(as_editor, text, message):
    response = as_editor.post(PREVIEW, sms_form(text, kind="shipped"), **HTMX)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert 'id="sms-segments"' not in response.content.decode()


def test_a_preview_past_the_worker_timeout_answers_an_error(as_editor, monkeypatch):
    run = worker.run
    monkeypatch.setattr(worker, "run", lambda func, *args: run(time.sleep, 30, timeout=0.2))  # a render that hangs
    response = as_editor.post(PREVIEW, sms_form("Hi {{ order }}", kind="shipped"), **HTMX)
    assert response.status_code == 200
    assert "template error: the preview took longer than 0.2 s and was stopped" in response.content.decode()


def test_a_missing_param_names_the_declared_ones(as_editor):
    response = as_editor.post(PREVIEW, sms_form("{{ ordr }}", kind="shipped"), **HTMX)
    assert "the kind <code>shipped</code> declares <code>order</code>, <code>tracking_url</code>" in (
        response.content.decode()
    )


def test_a_broken_email_template_shows_the_error_on_the_whole_page_too(as_editor):
    form = {"kind": "shipped", "language": "en", "channel": "email", "subject": "{{ order", "text_body": "x"}
    response = as_editor.post(PREVIEW, form)  # no JavaScript: the whole page
    assert response.status_code == 200
    assert "<html" in response.content.decode()
    assert "Template error.</strong>" in response.content.decode()
    assert "HX-Request" in response["Vary"]


def test_the_htmx_answer_is_the_panel_only(as_editor):
    response = as_editor.post(PREVIEW, sms_form("hi"), **HTMX)
    assert "<html" not in response.content.decode()
    assert '<p id="tpl-summary" hx-swap-oob="innerHTML">' in response.content.decode()
    assert "HX-Request" in response["Vary"]
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.parametrize("query", ["", "?kind=digest", "?kind=otp&language=AR", "?language=en"])
def test_a_query_that_leaves_values_out_opens_their_defaults(as_editor, query):
    assert as_editor.get(f"/templates/edit/{query}").status_code == 200


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?kind=nope", "There is no kind “nope”."),
        ("?kind=otp&language=xx", "There is no language “xx” here."),
        ("?kind=otp&channel=fax", "There is no channel “fax”: email, sms, push, inapp."),
        ("?kind=%00", "There is no kind &#x27;\\x00&#x27;."),
    ],
)
def test_a_kind_language_or_channel_that_does_not_exist_is_a_404_that_says_so(as_editor, query, message):
    response = as_editor.get(f"/templates/edit/{query}")
    assert response.status_code == 404
    assert message in response.content.decode()
    assert 'id="id_text_body"' not in response.content.decode()  # not silently another template


def test_a_template_rendering_half_an_emoji_is_an_error_not_a_500(as_editor):
    # The source is plain ASCII; the Jinja string escape makes the unpaired surrogate when rendered.
    text = "code {{ '\\ud83d' }}"
    response = as_editor.post(PREVIEW, {"kind": "otp", "language": "en", "channel": "sms", "text_body": text}, **HTMX)
    assert response.status_code == 200
    assert "unpaired surrogate" in response.content.decode()


@pytest.mark.parametrize(
    ("code", "label"),
    [
        ("en", "English (en)"),
        ("ar", "Arabic, العربية (ar)"),
        ("ps", "Pashto, پښتو (ps)"),  # CLDR's, as Django has no Pashto
        ("ary", "Moroccan Arabic (ary)"),  # CLDR has no name of its own for it: it read "ary (ary)"
    ],
)
def test_a_language_reads_by_its_english_name_and_its_own(code, label):
    assert forms.language_name(code) == label
