"""A notification's and a user's history as PDF (backend/support/pdf.py), read back with pdftotext."""

import re

import pytest
from django.contrib.auth.models import User

from backend.notifications.models import Attempt
from tests.support_setup import make_scene
from tests.test_campaign_report import pdf_text


@pytest.fixture
def scene(demo_data):
    return make_scene()


@pytest.fixture
def as_agent(client, demo_data):
    client.force_login(User.objects.get(username="support"))
    return client


def test_the_notification_pdf_has_the_arabic_text_the_trail_and_the_attempt(as_agent, scene):
    response = as_agent.get(f"/support/notifications/{scene.sent.pk}/history.pdf")

    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == f'attachment; filename="notification-{scene.sent.pk}.pdf"'
    text = pdf_text(response.content)
    # pdftotext gives the right-to-left run in logical order; the LTR order number may land on either side.
    assert "تم شحن طلبك رقم" in text
    assert "Accepted by twilio for delivery." in text
    attempt = re.search(r"^ *1 +twilio +2026-\S+ \S+ +87 ms +sent +SM5012abc +UCS-2 +1 +0\.04500$", text, re.MULTILINE)
    assert attempt, text
    assert "+9665••••567" in text and "+966501234567" not in text


def test_a_long_reference_wraps_and_leaves_the_cost_on_the_page(as_agent, scene):
    # Twilio's message SIDs are 34 characters without a space: the table once ran off the page's edge.
    reference = "SM6aebb40b9fb94b8abff2fb21ed1c6072"
    Attempt.objects.filter(notification=scene.sent).update(provider_ref=reference)
    text = pdf_text(as_agent.get(f"/support/notifications/{scene.sent.pk}/history.pdf").content)
    # Every header readable: "Segments" once ran into "Cost", and the text had no "Cost" at all.
    header = r"^ *# +Provider +Started \(UTC\) +Latency +Answer +Reference +Encoding +Segments +Cost$"
    assert re.search(header, text, re.MULTILINE)
    assert re.search(r" +UCS-2 +1 +0\.04500$", text, re.MULTILINE), text
    assert reference not in text  # wrapped inside its cell
    assert reference[:12] in text  # its first part, on the first line of its cell


def test_the_user_pdf_lists_every_notification_with_its_trail(as_agent, scene):
    text = pdf_text(as_agent.get("/support/users/u-ar-1/history.pdf").content)

    assert "User u-ar-1" in text
    assert "Not sent: promo on email is off in the user's preferences since" in text
    assert re.search(r"^ *1 +vonage +2026-\S+ \S+ +3001 +transient", text, re.MULTILINE), text
    assert "Failed: every attempt failed with a temporary error." in text
    assert text.count("Notification ") >= 3
    assert text.count("تم شحن طلبك رقم") == 2  # the orders 5012 and 5013, in Arabic


def test_other_roles_get_403_for_the_pdf(client, scene):
    client.force_login(User.objects.get(username="marketer"))

    assert client.get("/support/users/u-ar-1/history.pdf").status_code == 403
