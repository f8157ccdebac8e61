"""Two-person approval of template versions bound to the content hash the approver saw; versions never change."""

import hashlib
import json
from importlib import import_module

import pytest
from django.db.migrations.loader import MigrationLoader

from backend.notifications import actions
from backend.notifications.models import Kind, TemplateVersion
from backend.notifications.models.template import ImmutableVersionError

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def draft(editor):
    return TemplateVersion.objects.create(
        kind=Kind.objects.get(name="shipped"), language="en", channel="email", version=2,
        subject="Shipped: {{ order }}", text_body="Order {{ order }} shipped.", created_by=editor,
    )  # fmt: skip


def test_an_approver_approves_someone_elses_draft(draft, approver):
    actions.approve_template(draft, approver, draft.content_hash)
    draft.refresh_from_db()
    assert (draft.status, draft.approved_by) == ("approved", approver)


def test_it_refuses_a_draft_whose_author_account_is_gone(draft, approver, editor):
    editor.delete()  # created_by becomes NULL: nobody can show the approver is a second person
    draft.refresh_from_db()
    with pytest.raises(actions.ApprovalRefused) as refused:
        actions.approve_template(draft, approver, draft.content_hash)
    assert str(refused.value) == (
        "shipped/en/email v2 has no known author; save it again as a new draft for a second person to approve."
    )
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


def test_it_refuses_to_approve_content_the_approver_was_not_shown(draft, approver):
    shown = TemplateVersion(
        kind=draft.kind, language="en", channel="email", subject=draft.subject, text_body="Order {{ order }} lost.",
    ).compute_content_hash()  # fmt: skip
    with pytest.raises(actions.ContentChanged) as refused:
        actions.approve_template(draft, approver, shown)
    assert str(refused.value) == (
        f"shipped/en/email v2 is not the text you were shown (content hash {shown[:12]}…, it has "
        f"{draft.content_hash[:12]}…): open it again, read it, and approve what it says now."
    )
    assert TemplateVersion.objects.get(pk=draft.pk).status == "draft"


def test_the_content_hash_is_sha256_of_the_canonical_content(draft):
    canonical = [draft.kind_id, "en", "email", "Shipped: {{ order }}", "Order {{ order }} shipped.", ""]
    expected = hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode("ascii")).hexdigest()
    assert draft.content_hash == draft.compute_content_hash() == expected
    content = {name: getattr(draft, name) for name in ("kind_id", "language", "channel", "subject", "text_body",
                                                       "html_body")}  # fmt: skip
    otp = Kind.objects.get(name="otp").pk
    changes = [("kind_id", otp), ("language", "ar"), ("channel", "sms"), ("subject", "x"), ("text_body", "x"),
               ("html_body", "<p>x</p>")]  # fmt: skip
    for name, value in changes:
        assert TemplateVersion(**{**content, name: value}).compute_content_hash() != expected, name


def test_a_saved_version_never_changes(draft, approver):
    draft.text_body = "Order {{ order }} lost."
    with pytest.raises(ImmutableVersionError, match=r"^shipped/en/email v2 is saved: text_body cannot change"):
        draft.save()
    with pytest.raises(ImmutableVersionError, match=r"^Template versions are saved once: subject cannot change"):
        TemplateVersion.objects.filter(pk=draft.pk).update(subject="changed")
    stored = TemplateVersion.objects.get(pk=draft.pk)
    stored.created_by = approver
    with pytest.raises(ImmutableVersionError, match="created_by cannot change"):
        stored.save()
    impostor = TemplateVersion(pk=draft.pk, kind=draft.kind, language="en", channel="email", version=2, text_body="x")
    with pytest.raises(ImmutableVersionError, match="subject, text_body, created_at, created_by cannot change"):
        impostor.save()
    with pytest.raises(ImmutableVersionError, match="bulk_create may not update conflicts"):
        TemplateVersion.objects.bulk_create([impostor], update_conflicts=True, unique_fields=["id"],
                                            update_fields=["text_body"])  # fmt: skip
    assert TemplateVersion.objects.get(pk=draft.pk).text_body == "Order {{ order }} shipped."
    [inserted] = TemplateVersion.objects.bulk_create([TemplateVersion(kind=draft.kind, language="fa", text_body="x")])
    assert TemplateVersion.objects.get(pk=inserted.pk).content_hash == inserted.compute_content_hash()


def test_it_refuses_self_approval(approver):
    own = TemplateVersion.objects.create(
        kind=Kind.objects.get(name="promo"), language="en", channel="email", version=2, text_body="x",
        created_by=approver,
    )  # fmt: skip
    with pytest.raises(actions.ApprovalRefused, match="written by approver: a second person must approve it"):
        actions.approve_template(own, approver, own.content_hash)
    assert TemplateVersion.objects.get(pk=own.pk).status == "draft"


def test_it_refuses_a_user_without_the_approve_permission(draft, editor):
    with pytest.raises(actions.ApprovalRefused, match=r"^editor may not approve templates\.$"):
        actions.approve_template(draft, editor, draft.content_hash)


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


def test_the_admin_makes_no_versions(client, editor):
    """New versions come from the editor page (``save_template_draft``), never from the admin."""
    client.force_login(editor)
    kind = Kind.objects.get(name="shipped")
    response = client.post(
        "/admin/notifications/templateversion/add/",
        {"kind": kind.pk, "language": "ar", "channel": "email", "subject": "s", "text_body": "t", "html_body": ""},
    )
    assert response.status_code == 403
    assert not TemplateVersion.objects.filter(kind=kind, language="ar", channel="email", version=2).exists()


def test_a_draft_that_does_not_render_is_not_approved(editor, approver):
    broken = actions.save_template_draft(
        Kind.objects.get(name="otp"), "ar", "sms", editor, text_body="رمز {{ code "
    )  # fmt: skip
    with pytest.raises(actions.ApprovalRefused, match="does not render with the kind's example params: template error"):
        actions.approve_template(broken, approver, broken.content_hash)
    undeclared = actions.save_template_draft(
        Kind.objects.get(name="otp"), "ar", "sms", editor, text_body="{{ code }} {{ surprise }}"
    )  # fmt: skip
    with pytest.raises(actions.ApprovalRefused, match="missing params: surprise"):
        actions.approve_template(undeclared, approver, undeclared.content_hash)
    assert TemplateVersion.objects.get(kind__name="otp", language="ar", channel="sms", status="approved").version == 1


def test_text_with_an_unpaired_surrogate_is_refused(editor):
    with pytest.raises(actions.ApprovalRefused, match="unpaired surrogate"):
        actions.save_template_draft(Kind.objects.get(name="otp"), "en", "sms", editor, text_body="code \ud83d")


def test_migration_0006_backfills_every_versions_hash_and_its_reverse_empties_them(draft):
    migration = import_module("backend.notifications.migrations.0006_template_content_hash")
    apps = MigrationLoader(None).project_state(("notifications", "0006_template_content_hash")).apps
    migration.forget_hashes(apps, None)
    assert set(TemplateVersion.objects.values_list("content_hash", flat=True)) == {""}
    migration.hash_every_version(apps, None)
    versions = list(TemplateVersion.objects.all())
    assert len(versions) > 12
    assert all(version.content_hash == version.compute_content_hash() != "" for version in versions)
