"""Two-person approval of template versions, in the action and through the admin."""

import pytest

from backend.notifications import actions
from backend.notifications.models import Kind, TemplateVersion

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def draft(editor):
    return TemplateVersion.objects.create(
        kind=Kind.objects.get(name="shipped"), language="en", channel="email", version=2,
        subject="Shipped: {{ order }}", text_body="Order {{ order }} shipped.", created_by=editor,
    )  # fmt: skip


def test_an_approver_approves_someone_elses_draft(draft, approver):
    actions.approve_template(draft, approver)
    draft.refresh_from_db()
    assert (draft.status, draft.approved_by) == ("approved", approver)


def test_it_refuses_self_approval(approver):
    own = TemplateVersion.objects.create(
        kind=Kind.objects.get(name="promo"), language="en", channel="email", version=2, text_body="x",
        created_by=approver,
    )  # fmt: skip
    with pytest.raises(actions.ApprovalRefused, match="written by approver: a second person must approve it"):
        actions.approve_template(own, approver)
    assert TemplateVersion.objects.get(pk=own.pk).status == "draft"


def test_it_refuses_a_user_without_the_approve_permission(draft, editor):
    with pytest.raises(actions.ApprovalRefused, match=r"^editor may not approve templates\.$"):
        actions.approve_template(draft, editor)


def test_the_editor_cannot_approve_or_edit_an_approved_version_in_the_admin(client, editor):
    client.force_login(editor)
    live = TemplateVersion.objects.get(kind__name="shipped", language="en", channel="email", version=1)
    response = client.post(
        f"/admin/notifications/templateversion/{live.pk}/change/",
        {"kind": live.kind_id, "language": "en", "channel": "email", "subject": "hacked", "text_body": "hacked",
         "html_body": "", "status": "approved"},
    )  # fmt: skip
    assert response.status_code == 403
    assert TemplateVersion.objects.get(pk=live.pk).subject == "Your order {{ order }} has shipped"


def test_a_new_version_from_the_admin_is_a_sanitized_draft_with_the_next_number(client, editor):
    client.force_login(editor)
    kind = Kind.objects.get(name="shipped")
    response = client.post(
        "/admin/notifications/templateversion/add/",
        {"kind": kind.pk, "language": "ar", "channel": "email", "subject": "s", "text_body": "t",
         "html_body": '<p dir="rtl" onclick="steal()">نص</p><script>steal()</script>', "status": "approved"},
    )  # fmt: skip
    assert response.status_code == 302
    created = TemplateVersion.objects.get(kind=kind, language="ar", channel="email", version=2)
    assert (created.status, created.created_by) == ("draft", editor)
    assert created.html_body == '<p dir="rtl">نص</p>steal()'


def test_a_draft_that_does_not_render_is_not_approved(editor, approver):
    broken = actions.save_template_draft(
        Kind.objects.get(name="otp"), "ar", "sms", editor, text_body="رمز {{ code "
    )  # fmt: skip
    with pytest.raises(actions.ApprovalRefused, match="does not render with the kind's example params: template error"):
        actions.approve_template(broken, approver)
    undeclared = actions.save_template_draft(
        Kind.objects.get(name="otp"), "ar", "sms", editor, text_body="{{ code }} {{ surprise }}"
    )  # fmt: skip
    with pytest.raises(actions.ApprovalRefused, match="missing params: surprise"):
        actions.approve_template(undeclared, approver)
    assert TemplateVersion.objects.get(kind__name="otp", language="ar", channel="sms", status="approved").version == 1


def test_text_with_an_unpaired_surrogate_is_refused(editor):
    with pytest.raises(actions.ApprovalRefused, match="unpaired surrogate"):
        actions.save_template_draft(Kind.objects.get(name="otp"), "en", "sms", editor, text_body="code \ud83d")
