"""The admin shows contact data as the support explorer does: masked to staff who are not superusers, found whole only.

The explorer reveals a contact only through an audited button; the admin can audit nothing. Personas
(demo data): Layla (u-ar-1, layla@example.com, +966501234567) and Sam (u-en-1).
"""

import pytest
from django.contrib.auth.models import User

from backend.notifications.models import Recipient

pytestmark = pytest.mark.usefixtures("demo_data")

RECIPIENTS = "/admin/notifications/recipient/"


def page(client, username: str, path: str) -> str:
    client.force_login(User.objects.get(username=username))
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize("username", ["support", "marketer", "approver"])
def test_staff_see_contacts_masked_in_the_list_and_the_form(client, username):
    listing = page(client, username, RECIPIENTS)
    assert "l•••@example.com" in listing and "+9665••••567" in listing
    assert "layla@example.com" not in listing and "501234567" not in listing
    layla = Recipient.objects.get(user_id="u-ar-1")
    form = page(client, username, f"{RECIPIENTS}{layla.pk}/change/")
    assert "l•••@example.com" in form and "+9665••••567" in form
    assert "layla@example.com" not in form and "501234567" not in form


def test_a_prefix_finds_nobody_and_a_whole_contact_finds_its_owner(client):
    # A prefix search would spell a number out digit by digit from the results.
    assert "u-ar-1" not in page(client, "support", f"{RECIPIENTS}?q=%2B9665")
    assert "u-ar-1" not in page(client, "support", f"{RECIPIENTS}?q=layla")
    assert "u-ar-1" in page(client, "support", f"{RECIPIENTS}?q=%2B966501234567")
    assert "u-ar-1" in page(client, "support", f"{RECIPIENTS}?q=LAYLA@example.com")


def test_notifications_are_found_by_a_whole_phone_only(client, send):
    assert send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}}).status_code == 202
    notifications = "/admin/notifications/notification/"
    assert "u-ar-1" not in page(client, "support", f"{notifications}?q=%2B96650")
    assert "u-ar-1" in page(client, "support", f"{notifications}?q=%2B966501234567")


def test_the_superuser_sees_and_searches_them_whole(client):
    listing = page(client, "admin", f"{RECIPIENTS}?q=%2B9665")
    assert "layla@example.com" in listing and "+966501234567" in listing
