"""The admin shows contact data as the support explorer does: masked to staff who are not superusers, found whole only.

The explorer reveals a contact only through an audited button; the admin can audit nothing. Personas
(demo data): Layla (u-ar-1, layla@example.com, +966501234567) and Sam (u-en-1).
"""

import pytest
from django.contrib.auth.models import User

from backend.notifications.masking import mask_push_token
from backend.notifications.models import Device, Recipient

pytestmark = pytest.mark.usefixtures("demo_data")

RECIPIENTS = "/admin/notifications/recipient/"
FCM_TOKEN = "dQw4w9WgXcQ:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx_rUpLxTEcdLdi0Qk6Bz6yPzUmnJ6Zx9Qk7"
ENDPOINT = "https://updates.push.services.mozilla.com/wpush/v2/gAAAAABlx0fXa1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b7c8d9"


def page(client, username: str, path: str) -> str:
    client.force_login(User.objects.get(username=username))
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def test_support_agents_see_contacts_masked_in_the_list_and_the_form(client):
    listing = page(client, "support", RECIPIENTS)
    assert "l•••@example.com" in listing and "+9665••••567" in listing
    assert "layla@example.com" not in listing and "501234567" not in listing
    layla = Recipient.objects.get(user_id="u-ar-1")
    form = page(client, "support", f"{RECIPIENTS}{layla.pk}/change/")
    assert "l•••@example.com" in form and "+9665••••567" in form
    assert "layla@example.com" not in form and "501234567" not in form


@pytest.mark.parametrize("username", ["marketer", "approver", "editor"])
def test_only_support_agents_list_recipients(client, username):
    client.force_login(User.objects.get(username=username))
    layla = Recipient.objects.get(user_id="u-ar-1")
    assert client.get(RECIPIENTS).status_code == 403
    assert client.get(f"{RECIPIENTS}{layla.pk}/change/").status_code == 403


def test_push_tokens_are_masked_for_support_agents_and_whole_for_the_superuser(client):
    layla = Recipient.objects.get(user_id="u-ar-1")
    fcm = Device.objects.create(recipient=layla, platform="fcm", token=FCM_TOKEN)
    Device.objects.create(recipient=layla, platform="webpush", token=ENDPOINT)
    form = page(client, "support", f"{RECIPIENTS}{layla.pk}/change/")
    assert "•••Zx9Qk7" in form and "https://updates.push.services.mozilla.com/•••b7c8d9" in form
    assert FCM_TOKEN[:12] not in form and "gAAAAAB" not in form
    explorer = page(client, "support", "/support/users/u-ar-1/")
    assert "•••Zx9Qk7" in explorer and "https://updates.push.services.mozilla.com/•••b7c8d9" in explorer
    assert FCM_TOKEN[:12] not in explorer and "gAAAAAB" not in explorer
    whole = page(client, "admin", f"{RECIPIENTS}{layla.pk}/change/")
    assert FCM_TOKEN in whole and ENDPOINT in whole
    assert str(fcm) == "fcm:•••Zx9Qk7"


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


@pytest.mark.parametrize(
    ("platform", "token", "shown"),
    [
        ("fcm", FCM_TOKEN, "•••Zx9Qk7"),
        ("webpush", ENDPOINT, "https://updates.push.services.mozilla.com/•••b7c8d9"),
        ("webpush", "not-a-url-but-long-enough", "•••enough"),
        ("fcm", "short-token1", "•••"),  # 12 characters or fewer: the last six would be half of it
        ("fcm", "", ""),
    ],
)
def test_mask_push_token(platform, token, shown):
    assert mask_push_token(platform, token) == shown


@pytest.mark.parametrize("username", ["support", "admin"])
@pytest.mark.parametrize(
    "query",
    [
        "app_label=notifications&model_name=attempt&field_name=notification&term=a",
        "app_label=inbox&model_name=inboxmessage&field_name=recipient&term=u-",
        "app_label=nope&model_name=nothing&field_name=x",
        "app_label=notifications&model_name=attempt",
    ],
)
def test_the_admin_autocomplete_answers_only_declared_fields(client, username, query):
    # No admin declares autocomplete_fields: Django's endpoint searched every notification ever kept by
    # substring, past the list's default time window, for anyone who could view notifications.
    client.force_login(User.objects.get(username=username))
    assert client.get(f"/admin/autocomplete/?{query}").status_code == 403
