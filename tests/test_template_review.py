"""The approvers' workflow: what waits (with its count), a draft beside the version in use, request changes / reject."""

import re
from datetime import UTC, datetime
from unittest.mock import Mock

import pytest
import time_machine
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from backend.notifications import actions
from backend.notifications.models import Kind, TemplateEvent, TemplateVersion
from backend.notifications.models.template_history import MAX_COMMENT_CHARS
from frontend.editor import diff, worker

pytestmark = pytest.mark.usefixtures("demo_data")

AWAITING = "/templates/awaiting/"


@pytest.fixture
def as_approver(client, approver):
    client.force_login(approver)
    return client


@pytest.fixture
def admin_user(demo_data):
    """The demo's superuser: holds every permission, yet no exception to the two-person rule."""
    return User.objects.get(username="admin")


def a_draft(author, text="Your order {{ order }} is packed.", language="en", channel="sms", kind="shipped"):
    return actions.save_template_draft(Kind.objects.get(name=kind), language, channel, author, text_body=text)


def nav_count(page: str) -> str | None:
    found = re.search(r'id="nav-awaiting">templates <span class="nav-count"[^>]*>(\d+)<', page)
    return found.group(1) if found else None


def review(client, version, decision="changes", comment="Say 'packed', not 'shipped'."):
    return client.post(f"/templates/{version.pk}/review/decide/", {"decision": decision, "comment": comment})


# --- the list of what waits, and its count in the navigation ----------------------------------------------------------


def test_an_approver_sees_the_drafts_waiting_with_their_count_in_the_navigation(as_approver, editor):
    draft = a_draft(editor)
    a_draft(editor, "Tu pedido {{ order }} ya salió.", language="es")
    page = as_approver.get(AWAITING).content.decode()
    assert nav_count(page) == "2"
    assert '<span class="rv-count" id="rv-waiting-count">2</span>' in page
    assert f'href="/templates/{draft.pk}/review/"' in page
    assert "shipped · en · sms" in page
    assert nav_count(as_approver.get("/templates/").content.decode()) == "2"  # on every staff page


def test_the_waiting_list_costs_the_same_queries_however_many_drafts(as_approver, editor, django_assert_num_queries):
    a_draft(editor)
    as_approver.get(AWAITING)  # warm the session and permission caches
    with CaptureQueriesContext(connection) as first:
        as_approver.get(AWAITING)
    for language in ("es", "fr", "de"):
        a_draft(editor, f"{language} {{{{ order }}}}", language=language)
    with django_assert_num_queries(len(first.captured_queries)):
        page = as_approver.get(AWAITING).content.decode()
    assert nav_count(page) == "4"


def test_only_the_newest_version_of_a_template_waits(as_approver, editor):
    a_draft(editor, "first try {{ order }}")
    newest = a_draft(editor, "second try {{ order }}")
    page = as_approver.get(AWAITING).content.decode()
    assert nav_count(page) == "1"
    assert f"/templates/{newest.pk}/review/" in page


def test_an_approvers_own_drafts_are_listed_apart_and_not_counted(client, admin_user, approver):
    client.force_login(admin_user)
    a_draft(admin_user)
    page = client.get(AWAITING).content.decode()
    assert nav_count(page) == "0"
    assert "Nothing waits for you." in page
    assert "Your own drafts, waiting for another approver" in page


def test_a_draft_sent_back_no_longer_waits(as_approver, editor):
    draft = a_draft(editor)
    review(as_approver, draft)
    assert nav_count(as_approver.get(AWAITING).content.decode()) == "0"


def test_the_navigation_count_is_for_approvers_only(client, editor):
    a_draft(editor)
    client.force_login(editor)
    assert nav_count(client.get("/templates/").content.decode()) is None


@pytest.mark.parametrize("persona", ["editor", "outsider", "marketer"])
def test_who_may_not_approve_gets_no_waiting_list(client, persona, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(AWAITING).status_code == 403


def test_an_anonymous_visitor_is_sent_to_the_login(client):
    assert client.get(AWAITING)["Location"].startswith("/admin/login/?next=/templates/awaiting/")


# --- the side-by-side diff --------------------------------------------------------------------------------------------


def test_the_rows_pair_changed_lines_and_mark_the_changed_words():
    rows = diff.side_by_side("Hello {{ name }}\nsame line\ngone", "Hi {{ name }}\nsame line\nnew one\nadded")
    assert [row.tag for row in rows] == ["replace", "equal", "replace", "insert"]
    first = rows[0]
    assert [(p.text, p.changed) for p in first.old.pieces] == [("Hello", True), (" {{ name }}", False)]
    assert [(p.text, p.changed) for p in first.new.pieces] == [("Hi", True), (" {{ name }}", False)]
    assert (rows[3].old, rows[3].new.number, rows[3].new.pieces[0].text) == (None, 4, "added")


def test_a_very_long_line_is_marked_whole():
    old, new = "a" * (diff.MAX_MARKED_LINE + 1), "b" * (diff.MAX_MARKED_LINE + 1)
    row = diff.side_by_side(old, new)[0]
    assert row.old.pieces == (diff.Piece(old, True),) and row.new.pieces == (diff.Piece(new, True),)


def test_the_review_page_shows_the_draft_beside_the_version_in_use(as_approver, editor):
    draft = a_draft(editor, "Your order {{ order }} is packed.")
    page = as_approver.get(f"/templates/{draft.pk}/review/").content.decode()
    assert "Compared with v1, the version in use" in page
    # v1 says "Your order {{ order }} has shipped."
    assert 'rv-old" dir="ltr" lang="en">Your order {{ order }} <del>has shipped</del>.</td>' in page
    assert 'rv-new" dir="ltr" lang="en">Your order {{ order }} <ins>is packed</ins>.</td>' in page
    assert 'id="rv-approve"' in page and 'id="rv-request-changes"' in page and 'id="rv-reject"' in page
    assert f'name="content_hash" value="{draft.content_hash}"' in page


def test_the_diff_escapes_what_the_draft_says(as_approver, editor):
    draft = a_draft(editor, "<script>alert(1)</script> {{ order }}")
    page = as_approver.get(f"/templates/{draft.pk}/review/").content.decode()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in re.sub(r"</?(ins|del)>", "", page)


def test_an_arabic_diff_reads_right_to_left_and_its_html_source_left_to_right(as_approver, editor):
    kind = Kind.objects.get(name="shipped")
    draft = actions.save_template_draft(
        kind, "ar", "email", editor, subject="طلبك {{ order }}", text_body="طلبك {{ order }} جاهز.",
        html_body="<p>طلبك <bdi>{{ order }}</bdi> جاهز.</p>",
    )  # fmt: skip
    page = as_approver.get(f"/templates/{draft.pk}/review/").content.decode()
    subject, text, html = re.findall(r'<section class="rv-part" aria-label="([^"]+)">(.*?)</section>', page, re.S)
    assert subject[0] == "Subject" and 'class="rv-text rv-new" dir="rtl" lang="ar">' in subject[1]
    assert text[0] == "Text" and 'class="rv-text rv-new" dir="rtl" lang="ar">' in text[1]
    assert html[0] == "HTML body" and 'class="rv-text rv-new" dir="ltr" lang="ar">' in html[1]
    assert 'dir="rtl"' not in html[1]


def test_a_first_version_is_compared_with_nothing(as_approver, editor):
    draft = a_draft(editor, "Hola {{ order }}", language="es")
    page = as_approver.get(f"/templates/{draft.pk}/review/").content.decode()
    assert "Nothing of this template is in use yet: every line is new." in page


def test_the_writer_sees_the_diff_without_review_buttons(client, editor):
    draft = a_draft(editor)
    client.force_login(editor)
    page = client.get(f"/templates/{draft.pk}/review/").content.decode()
    assert "<ins>" in page
    assert 'id="rv-approve"' not in page and 'id="rv-request-changes"' not in page


# --- request changes / reject ----------------------------------------------------------------------------------------


def test_the_review_of_a_new_draft_shows_what_was_asked_of_the_earlier_ones(as_approver, editor):
    with time_machine.travel(datetime(2026, 12, 2, 9, 0, tzinfo=UTC), tick=False):
        v2 = a_draft(editor, "Packed: {{ order }}")
        review(as_approver, v2, comment="Say the order <number>.")
    with time_machine.travel(datetime(2026, 12, 2, 10, 30, tzinfo=UTC), tick=False):
        v3 = a_draft(editor, "Order {{ order }} packd.")
        review(as_approver, v3, decision="reject", comment="Typo: packd.")
    v4 = a_draft(editor, "Order {{ order }} is packed.")
    page = as_approver.get(f"/templates/{v4.pk}/review/").content.decode()
    earlier = re.search(r'<section class="rv-earlier" id="rv-earlier">(.*?)</section>', page, re.S).group(1)
    items = [" ".join(item.split()) for item in re.findall(r"<li>(.*?)</li>", earlier, re.S)]
    assert items == [
        f'<strong>v{v3.version}</strong>: rejected by approver on 2026-12-02 10:30 — <q dir="auto">Typo: packd.</q>',
        f"<strong>v{v2.version}</strong>: changes requested by approver on 2026-12-02 09:00 — "
        '<q dir="auto">Say the order &lt;number&gt;.</q>',
    ]
    live = as_approver.get(f"/templates/{TemplateVersion.objects.get(pk=v2.pk).pk}/review/").content.decode()
    assert 'id="rv-earlier"' not in live  # nothing was asked before v2 since the version in use


def test_an_approver_requests_changes_with_a_comment_the_writer_sees(as_approver, approver, editor, client):
    draft = a_draft(editor)
    response = review(as_approver, draft, comment="Say 'packed', not <b>shipped</b>.\nThanks")
    assert response.status_code == 302 and response["Location"] == AWAITING
    draft.refresh_from_db()
    assert draft.status == TemplateVersion.Status.CHANGES
    event = draft.events.get(action=TemplateEvent.Action.CHANGES)
    assert (event.actor, event.actor_name, event.comment) == (
        approver,
        "approver",
        "Say 'packed', not <b>shipped</b>.\nThanks",
    )

    client.force_login(editor)
    page = client.get(f"/templates/{draft.pk}/").content.decode()
    note = re.search(r'id="tpl-review-note">(.*?)</div>', page, re.S).group(1)
    assert "Changes requested by approver" in note
    assert "Say &#x27;packed&#x27;, not &lt;b&gt;shipped&lt;/b&gt;.\nThanks" in note
    history = re.search(r'id="tpl-events">(.*?)</ol>', page, re.S).group(1)
    assert "changes requested" in history and "not &lt;b&gt;shipped" in history
    assert "saved as a draft" in history


def test_an_approver_rejects_a_draft(as_approver, editor):
    draft = a_draft(editor)
    assert review(as_approver, draft, decision="reject", comment="We do not send this.").status_code == 302
    draft.refresh_from_db()
    assert draft.status == TemplateVersion.Status.REJECTED


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("  \n ", "Write a comment: the writer needs to know what to change."),
        ("x" * (MAX_COMMENT_CHARS + 1), f"The comment may be at most {MAX_COMMENT_CHARS} characters (it has 2001)."),
    ],
)
def test_a_review_needs_a_comment_of_bounded_length(as_approver, editor, comment, message):
    draft = a_draft(editor)
    response = review(as_approver, draft, comment=comment)
    assert response.status_code == 400
    assert message in response.content.decode()
    draft.refresh_from_db()
    assert draft.status == TemplateVersion.Status.DRAFT


def test_an_unknown_decision_is_a_400(as_approver, editor):
    response = review(as_approver, a_draft(editor), decision="approve-everything")
    assert response.status_code == 400
    assert "Choose: request changes or reject." in response.content.decode()


def test_a_sent_back_draft_can_no_longer_be_approved(as_approver, editor):
    draft = a_draft(editor)
    review(as_approver, draft)
    draft.refresh_from_db()
    response = as_approver.post(f"/templates/{draft.pk}/approve/", {"content_hash": draft.content_hash})
    assert response.status_code == 403
    assert "is changes requested, not a draft waiting for approval." in response.content.decode()


def test_the_admin_may_not_review_or_approve_their_own_draft(client, admin_user):
    draft = a_draft(admin_user)
    client.force_login(admin_user)
    response = review(client, draft)
    assert response.status_code == 403
    assert "was written by admin: a second person must review it." in response.content.decode()
    response = client.post(f"/templates/{draft.pk}/approve/", {"content_hash": draft.content_hash})
    assert response.status_code == 403
    draft.refresh_from_db()
    assert draft.status == TemplateVersion.Status.DRAFT


def test_the_admin_may_not_reject_an_approved_version(client, admin_user):
    live = TemplateVersion.objects.get(kind__name="shipped", language="en", channel="sms", version=1)
    client.force_login(admin_user)
    assert review(client, live, decision="reject").status_code == 403
    live.refresh_from_db()
    assert live.status == TemplateVersion.Status.APPROVED


@pytest.mark.parametrize("persona", ["editor", "outsider", "marketer"])
def test_who_may_not_approve_may_not_review(client, persona, request, editor):
    draft = a_draft(editor)
    client.force_login(request.getfixturevalue(persona))
    assert review(client, draft).status_code == 403
    assert not draft.events.filter(action=TemplateEvent.Action.CHANGES).exists()


def test_a_review_needs_the_csrf_token(approver, editor):
    draft = a_draft(editor)
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    assert review(client, draft).status_code == 403
    draft.refresh_from_db()
    assert draft.status == TemplateVersion.Status.DRAFT


def test_a_review_is_only_posted(as_approver, editor):
    assert as_approver.get(f"/templates/{a_draft(editor).pk}/review/decide/").status_code == 405


# --- the history is the audit -----------------------------------------------------------------------------------------


def test_saving_and_approving_are_recorded_in_the_history(approver, editor):
    draft = a_draft(editor)
    actions.approve_template(draft, approver, draft.content_hash)
    events = list(draft.events.order_by("at", "pk").values_list("action", "actor_name", "detail"))
    assert events == [
        ("save", "editor", {"content_hash": draft.content_hash}),
        ("approve", "approver", {"content_hash": draft.content_hash}),
    ]


def test_a_refused_review_records_nothing(admin_user):
    draft = a_draft(admin_user)
    with pytest.raises(actions.ApprovalRefused, match="was written by admin: a second person must review it"):
        actions.review_template(draft, admin_user, TemplateEvent.Action.REJECT, "no")
    assert list(draft.events.values_list("action", flat=True)) == ["save"]


# --- read-only roles view, writers edit ------------------------------------------------------------------------------


def test_a_read_only_role_is_told_viewing_not_editing(as_approver):
    page = as_approver.get("/templates/edit/?kind=shipped&language=en&channel=sms").content.decode()
    assert re.search(r"Viewing <strong>v1</strong>", page)
    assert "Editing from" not in page


def test_a_writer_is_told_editing_from(client, editor):
    client.force_login(editor)
    page = client.get("/templates/edit/?kind=shipped&language=en&channel=sms").content.decode()
    assert re.search(r"Editing from <strong>v1</strong>", page)


# --- what approving changes for callers -------------------------------------------------------------------------------


def test_the_review_says_which_param_callers_must_now_send_and_what_an_sms_costs(as_approver, editor):
    # Demo v1: «سفارش شماره {{ order }} شما ارسال شد.» needs order only; 26 characters besides it.
    draft = a_draft(editor, "سفارش شماره {{ order }} شما ارسال شد – پیگیری: {{ tracking_url }}", language="fa")
    page = as_approver.get(f"/templates/{draft.pk}/review/").content.decode()
    assert 'id="rv-new-params"' in page
    assert "must carry <code>tracking_url</code>: shipped/fa/sms v1, in use now, does not need it" in page
    assert "will be refused (422, missing params)" in page
    # Example: 36 characters + "5012" + the 26 of https://example.com/t/5012 = 66 UTF-16 units, one segment.
    # Worst: order 12 × 😀 and tracking_url 80 × 😀 (2 units each): parts of 67 units never split a pair, so
    # 60 + 3 emoji (66), 33 (66), 33 (66), 11 (22): four. v1: 30 units, and 26 + 24 = 50 at worst: one each.
    assert (
        "<strong>1</strong> segment, at worst (each param at its longest) <strong>4</strong>; "
        "shipped/fa/sms v1: 1, at worst 1." in page
    )


def test_the_sms_is_measured_in_the_preview_worker_and_a_draft_it_stops_reads_as_not_measured(
    as_approver, editor, monkeypatch
):
    """A draft is an author's text: measuring it is bounded in time and memory there, as the editor's panel is."""
    draft = a_draft(editor, "Your order {{ order }} is packed.")
    monkeypatch.setattr(worker, "run", Mock(side_effect=worker.PreviewTimeout("the preview took longer than 2 s")))

    response = as_approver.get(f"/templates/{draft.pk}/review/")

    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="rv-segments"' not in page
    assert (
        "This SMS could not be measured with the kind's example params: "
        "template error: the preview took longer than 2 s</p>" in page
    )


def test_a_param_given_a_default_stays_optional(as_approver, editor):
    text = "سفارش شماره {{ order }} شما ارسال شد – پیگیری: {{ tracking_url|default('حساب شما') }}"
    draft = a_draft(editor, text, language="fa")
    page = as_approver.get(f"/templates/{draft.pk}/review/").content.decode()
    assert 'id="rv-new-params"' not in page
    assert 'id="rv-segments"' in page


def test_the_template_list_names_who_wrote_and_who_approved_the_latest(as_approver, editor, approver):
    draft = a_draft(editor, language="es")
    actions.approve_template(draft, approver, draft.content_hash)
    page = as_approver.get("/templates/?kind=shipped&language=es").content.decode()
    assert "written by editor, approved by approver" in page


def test_a_draft_with_a_bidi_override_is_refused(editor):
    with pytest.raises(actions.ApprovalRefused, match=r"U\+202E \(right-to-left override\)"):
        a_draft(editor, "Track it at https://\u202emoc.knab-ruoy/{{ order }}")
    assert not TemplateVersion.objects.filter(text_body__contains="\u202e").exists()


def test_an_override_made_by_an_entity_or_an_escape_is_refused_too(editor, approver):
    # The sanitizer decodes &#x202E; into the character itself; a string escape renders it.
    with pytest.raises(actions.ApprovalRefused, match=r"U\+202E"):
        actions.save_template_draft(
            Kind.objects.get(name="shipped"), "en", "email", editor, subject="Order {{ order }}",
            text_body="Order {{ order }}", html_body='<a href="https://evil.example">&#x202E;moc.knab-ruoy</a>',
        )  # fmt: skip
    draft = a_draft(editor, 'Order {{ order }}: pay at {{ "\\u202e" }}moc.knab-ruoy')
    problem = actions.approval_problem(draft, approver)
    assert "does not render with the kind's example params" in problem and "U+202E" in problem
