"""A restarted demo keeps its API key (demo_api_key) and leaves templates and their approvals alone (demo_data)."""

import io
import stat

import pytest
from django.core.management import call_command

from backend.notifications import actions
from backend.notifications.models import ApiClient, TemplateVersion

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().splitlines()[-1]


def authenticates(client, key: str) -> bool:
    return client.get("/api/v1/users/x", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 404


def test_the_demo_key_is_the_same_on_every_start_and_keeps_working(client, tmp_path):
    path = tmp_path / "demo-api-key"
    first = run("demo_api_key", "--file", str(path))
    again = run("demo_api_key", "--file", str(path))
    assert first == again and first.startswith("ntf_")
    assert authenticates(client, first)
    assert ApiClient.objects.filter(name="demo").count() == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_lost_key_file_gives_the_same_client_a_new_key(client, tmp_path):
    path = tmp_path / "demo-api-key"
    old = run("demo_api_key", "--file", str(path))
    pk = ApiClient.objects.get(name="demo").pk
    path.unlink()
    new = run("demo_api_key", "--file", str(path))
    assert new != old and path.read_text().strip() == new
    assert ApiClient.objects.get(name="demo").pk == pk  # its notifications stay its own
    assert authenticates(client, new) and not authenticates(client, old)


def test_a_kept_key_that_no_longer_authenticates_is_replaced(client, tmp_path):
    path = tmp_path / "demo-api-key"
    old = run("demo_api_key", "--file", str(path))
    ApiClient.objects.filter(name="demo").update(is_active=False)
    new = run("demo_api_key", "--file", str(path))
    assert new != old and authenticates(client, new)


def test_demo_data_again_leaves_templates_and_approvals_alone(editor, approver):
    v1 = TemplateVersion.objects.get(kind__name="shipped", language="en", channel="email", version=1)
    draft = actions.save_template_draft(
        v1.kind, "en", "email", editor, subject="Shipped: {{ order }}", text_body="Order {{ order }} is on its way.",
        html_body="",
    )  # fmt: skip
    actions.approve_template(draft, approver, draft.content_hash)
    before = list(TemplateVersion.objects.order_by("pk").values("pk", "status", "approved_at", "approved_by"))
    call_command("demo_data", stdout=io.StringIO())
    after = list(TemplateVersion.objects.order_by("pk").values("pk", "status", "approved_at", "approved_by"))
    assert after == before
    live = TemplateVersion.objects.filter(kind__name="shipped", language="en", channel="email", status="approved")
    assert live.latest("approved_at").version == 2
