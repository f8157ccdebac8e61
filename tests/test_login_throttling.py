"""The staff login (the admin's) is throttled per username × address by django-axes (NOTIFY_LOGIN_* settings)."""

from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.usefixtures("demo_data")

LOGIN = "/admin/login/?next=/admin/"
OFFICE, HOME = "203.0.113.7", "198.51.100.20"


def sign_in(client: Client, username: str, password: str, address: str = OFFICE):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(client: Client, times: int, username: str = "editor", address: str = OFFICE) -> list[int]:
    """Statuses of ``times`` wrong passwords: 200 is the form again with its error, 429 the lockout page."""
    return [sign_in(client, username, "wrong", address).status_code for _ in range(times)]


def test_the_right_password_signs_in(client, editor):
    response = sign_in(client, "editor", "demo")
    assert response.status_code == 302
    assert response["Location"] == "/admin/"


def test_five_wrong_passwords_lock_the_pair_out_even_with_the_right_one(client, editor):
    assert fail(client, 5) == [200, 200, 200, 200, 429]
    response = sign_in(client, "editor", "demo")
    assert response.status_code == 429
    html = response.content.decode()
    assert "<h1>Too many failed sign-ins</h1>" in html
    assert "After 5 wrong passwords for this username from your address, signing in is paused for 0:15:00" in html
    assert "_auth_user_id" not in client.session


def test_a_new_password_does_not_lift_the_lockout_so_the_page_does_not_offer_one(client, editor):
    """The pause counts attempts per username × address, whatever the password: only the cool-off or an
    administrator's reset (manage.py axes_reset_username) ends it, and the page says that."""
    fail(client, 5)
    editor.set_password("a-new-password")
    editor.save()
    response = sign_in(client, "editor", "a-new-password")
    assert response.status_code == 429
    html = response.content.decode()
    assert "reset your password" not in html
    assert "Wait and try again, or ask an administrator to lift the pause." in html


def test_the_same_user_from_another_address_and_another_user_are_not_locked_out(editor, approver):
    fail(Client(), 5)
    assert sign_in(Client(), "editor", "demo", address=HOME).status_code == 302
    assert sign_in(Client(), "approver", "demo", address=OFFICE).status_code == 302


def test_the_lockout_ends_after_the_cooloff(client, editor):
    fail(client, 5)
    with time_machine.travel(timezone.now() + timedelta(seconds=901), tick=False):
        assert sign_in(client, "editor", "demo").status_code == 302


def test_a_success_resets_the_count(client, editor):
    assert fail(client, 4) == [200] * 4
    assert sign_in(Client(), "editor", "demo").status_code == 302
    assert fail(client, 4) == [200] * 4
    assert sign_in(client, "editor", "demo").status_code == 302


def test_the_limit_and_cooloff_come_from_the_settings(client, editor, settings):
    settings.AXES_FAILURE_LIMIT = 2
    assert fail(client, 2) == [200, 429]
    assert sign_in(client, "editor", "demo").status_code == 429
