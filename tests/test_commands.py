"""create_api_key, demo_data and run_scheduler --once."""

import importlib
import io
import re

import pytest
from django.apps import apps
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.db import connection

from backend.notifications.models import ApiClient, Kind, Notification, Recipient, TemplateVersion

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_api_key_prints_a_key_that_authenticates(client):
    key = run("create_api_key", "orders").splitlines()[-1]
    assert key.startswith("ntf_") and len(key) > 40
    client_row = ApiClient.objects.get(name="orders")
    assert key not in (client_row.key_hash, client_row.key_hint)
    response = client.get("/api/v1/users/x", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert response.status_code == 404  # authenticated: the user is what is missing


def test_create_api_key_refuses_an_existing_name_unless_rotating(client):
    old = run("create_api_key", "orders").splitlines()[-1]
    with pytest.raises(
        CommandError, match=re.escape("A client named 'orders' exists; pass --rotate to replace its key.")
    ):
        run("create_api_key", "orders")
    new = run("create_api_key", "orders", "--rotate").splitlines()[-1]
    assert client.get("/api/v1/users/x", HTTP_AUTHORIZATION=f"Bearer {old}").status_code == 401
    assert client.get("/api/v1/users/x", HTTP_AUTHORIZATION=f"Bearer {new}").status_code == 404


def test_create_api_key_limits_a_new_client_to_its_kinds_and_rate(db):
    call_command("demo_data", stdout=io.StringIO())
    run("create_api_key", "shop", "--kinds", "shipped, promo", "--rate", "50")
    shop = ApiClient.objects.get(name="shop")
    assert (shop.every_kind, shop.rate_limit, shop.may_erase) == (False, 50, False)
    run("create_api_key", "privacy", "--may-erase")
    assert ApiClient.objects.get(name="privacy").may_erase is True
    assert sorted(shop.allowed_kinds.values_list("name", flat=True)) == ["promo", "shipped"]
    assert shop.kind_refusal(Kind.objects.get(name="otp")).startswith("this API client may not send otp")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kinds", "shipped,nope"], "--kinds: no kind is named nope."),
        (["--kinds", ","], "--kinds: no kind is named ','."),
        (["--rate", "0"], "--rate 0: give notifications a second, from 1 to 1,000,000."),
        (["--rate", "99999999999999999999"], "--rate 99999999999999999999: give notifications a second, from 1 to"),
        (
            ["--rotate", "--rate", "5"],
            "--kinds, --rate and --may-erase are for a new client; change an existing one in the admin.",
        ),
    ],
)
def test_create_api_key_refuses_limits_it_cannot_apply_and_makes_no_client(db, args, message):
    call_command("demo_data", stdout=io.StringIO())
    with pytest.raises(CommandError, match=re.escape(message)):
        run("create_api_key", "shop", *args)
    assert not ApiClient.objects.filter(name="shop").exists()


# Names that read as "orders" to a person but were different strings to the database.
LOOKALIKES = [
    ("orders\u200b", "a zero-width space after it"),
    ("\u043erders", "a Cyrillic small o"),
    ("orders\u200f", "a right-to-left mark"),
    ("Orders", "a capital: a case twin"),
    ("ſervice", "a long s, which PostgreSQL's UPPER folds to S"),
    ("ord ers", "a space"),
    ("-orders", "a leading dash, which a shell reads as an option"),
]


@pytest.mark.parametrize(("name", "why"), LOOKALIKES)
def test_create_api_key_refuses_a_name_outside_the_rule_and_so_does_rotate(name, why):
    run("create_api_key", "orders")
    for rotate in ([], ["--rotate"]):
        with pytest.raises(CommandError, match=re.escape(f"{name!r}: A client's name is lowercase ASCII letters")):
            run("create_api_key", *rotate, "--", name)
    assert list(ApiClient.objects.values_list("name", flat=True)) == ["orders"], why


def test_the_model_refuses_a_name_outside_the_rule_and_a_taken_one():
    ApiClient.issue("orders")
    with pytest.raises(ValidationError, match="lowercase ASCII letters"):
        ApiClient.issue("ORDERS")
    with pytest.raises(ValidationError, match="API client with this Name already exists"):
        ApiClient.issue("orders")


def test_demo_api_key_refuses_a_name_outside_the_rule(tmp_path):
    with pytest.raises(CommandError, match=re.escape("--name 'Demo': A client's name is lowercase")):
        run("demo_api_key", "--file", str(tmp_path / "key"), "--name", "Demo")
    assert not ApiClient.objects.exists()


def test_migration_0025_names_each_client_to_rename_before_it_applies():
    rule = importlib.import_module("backend.notifications.migrations.0025_api_client_name_rule")
    ApiClient.issue("orders")
    legacy = ApiClient.issue("legacy")[0]
    # The database as it was before the rule: without 0026's CHECK (dropped inside this test's transaction).
    [check] = ApiClient._meta.constraints
    with connection.schema_editor() as editor:
        editor.remove_constraint(ApiClient, check)
    ApiClient.objects.filter(pk=legacy.pk).update(name="\u041erders")  # made before the rule existed

    with pytest.raises(RuntimeError, match=re.escape(f"rename '\u041erders' (id {legacy.pk}) first")):
        rule.refuse_names_that_break_the_rule(apps, None)
    ApiClient.objects.filter(pk=legacy.pk).update(name="orders-legacy")
    rule.refuse_names_that_break_the_rule(apps, None)


def test_rotate_of_a_name_no_client_has_is_refused_not_a_new_client():
    # A typo while rotating a leaked key must not leave the leaked key working beside a new client.
    run("create_api_key", "orders")
    with pytest.raises(CommandError, match=re.escape("No client is named 'ordres': nothing to rotate")):
        run("create_api_key", "ordres", "--rotate")
    assert list(ApiClient.objects.values_list("name", flat=True)) == ["orders"]


def test_rotating_a_key_keeps_the_client_its_notifications_and_its_idempotency_scope(client, demo_data):
    old = run("create_api_key", "orders").splitlines()[-1]
    orders = ApiClient.objects.get(name="orders")
    ApiClient.objects.filter(pk=orders.pk).update(reads_all_notifications=True)
    body = {"user_id": "u-en-1", "kind": "shipped", "params": {"order": "5012"}}
    headers = {"HTTP_IDEMPOTENCY_KEY": "order-5012-shipped", "content_type": "application/json"}
    accepted = client.post("/api/v1/notifications", body, HTTP_AUTHORIZATION=f"Bearer {old}", **headers)
    assert accepted.status_code == 202

    new = run("create_api_key", "orders", "--rotate").splitlines()[-1]

    rotated = ApiClient.objects.get(name="orders")
    assert (rotated.pk, rotated.reads_all_notifications) == (orders.pk, True) and rotated.key_hash != orders.key_hash
    assert Notification.objects.get(pk=accepted.json()["id"]).client_id == orders.pk
    # The service's retry after the rotation, with its new key: the same notification, not a second one.
    retried = client.post("/api/v1/notifications", body, HTTP_AUTHORIZATION=f"Bearer {new}", **headers)
    assert (retried.status_code, retried.json()["id"]) == (200, accepted.json()["id"])


def test_rotating_a_revoked_clients_key_says_it_stays_revoked(client):
    run("create_api_key", "orders")
    ApiClient.objects.filter(name="orders").update(is_active=False)

    *said, key = run("create_api_key", "orders", "--rotate").splitlines()

    assert said[0] == "orders is revoked: this key is refused until the client is active again."
    assert client.get("/api/v1/users/x", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401
    ApiClient.objects.filter(name="orders").update(is_active=True)
    assert client.get("/api/v1/users/x", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 404


def test_demo_data_can_run_twice():
    run("demo_data")
    run("demo_data")
    assert sorted(Kind.objects.values_list("name", "priority", "opt_out_allowed")) == [
        ("digest", "standard", True), ("otp", "high", False), ("promo", "standard", True),
        ("shipped", "standard", True),
    ]  # fmt: skip
    from backend.notifications.management.commands.demo_data import TEMPLATES

    assert TemplateVersion.objects.filter(status="approved").count() == len(TEMPLATES) >= 12
    assert set(TemplateVersion.objects.values_list("language", flat=True)) == {"ar", "en", "fa"}
    assert Recipient.objects.get(user_id="u-ar-1").language == "ar"


@pytest.mark.django_db
def test_the_demo_roles_name_permissions_that_exist_and_a_wrong_name_is_an_error():
    from django.contrib.auth.models import Permission

    from backend.notifications.management.commands.demo_data import _permissions

    found = _permissions(["view_kind", "campaigns.view_campaign", "support.use_explorer"])
    assert sorted((p.content_type.app_label, p.codename) for p in found) == [
        ("campaigns", "view_campaign"), ("notifications", "view_kind"), ("support", "use_explorer"),
    ]  # fmt: skip
    with pytest.raises(Permission.DoesNotExist, match=r"No permission campaigns\.view_kind, notifications\.fly"):
        _permissions(["view_kind", "fly", "campaigns.view_kind"])


def test_run_scheduler_once_reports_what_it_did():
    assert run("run_scheduler", "--once").strip() == "sweep: 0 stale sending, 0 stale queued, 0 scheduled released"
