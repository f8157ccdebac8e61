"""The "Send a test to me" button: typed values, own address only, marked, throttled, masked, in the history."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from backend.notifications import email_footer
from backend.notifications.actions import send_to_self
from backend.notifications.masking import MASK
from backend.notifications.models import Notification, StaffContact, TemplateEvent, TemplateVersion
from inbox.models import InboxMessage

pytestmark = pytest.mark.usefixtures("demo_data")

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def version_of(kind: str, language: str, channel: str) -> TemplateVersion:
    return TemplateVersion.objects.get(kind__name=kind, language=language, channel=channel, version=1)


def send_test(client, version: TemplateVersion, **params):
    return client.post(f"/templates/{version.pk}/test/", {f"param-{name}": value for name, value in params.items()})


@pytest.fixture
def as_editor(client, editor):
    client.force_login(editor)
    return client


# --- by email, to the Django user's own address ----------------------------------------------------------------------


def test_an_editor_sends_a_test_with_typed_values_to_their_own_email(as_editor, editor, smtp_sink):
    version = version_of("shipped", "en", "email")
    response = send_test(as_editor, version, order="TYPED-77", tracking_url="https://example.com/t/77")
    assert response.status_code == 302
    assert response["Location"] == f"/templates/{version.pk}/"
    [mail] = smtp_sink.wait_for(1)
    assert mail["To"] == "editor@example.com"
    assert mail["Subject"] == "[TEST] Your order TYPED-77 has shipped"
    assert mail["X-Notify-Test"] == "1"
    assert "your order TYPED-77 is on its way" in mail.get_body(("plain",)).get_content()
    event = version.events.get(action=TemplateEvent.Action.TEST)
    assert event.actor_name == "editor"
    assert event.detail == {
        "channel": "email", "to": "e•••@example.com", "params": {"order": "TYPED-77", "tracking_url": "https://example.com/t/77"},
        "provider": "smtp", "reference": f"<template-test-{event.pk}@localhost>",
    }  # fmt: skip


def test_a_marketing_test_carries_the_footer_recipients_get_in_its_language(as_editor, smtp_sink):
    """The editor sees what goes out: the platform's unsubscribe footer, right to left in Arabic."""
    send_test(as_editor, version_of("promo", "ar", "email"), percent="20")
    [mail] = smtp_sink.wait_for(1)
    text = mail.get_body(("plain",)).get_content()
    html = mail.get_body(("html",)).get_content()
    assert text.count(email_footer.SAMPLE_URL) == 2  # unsubscribe and the settings: no recipient's own link
    assert '<table role="presentation" width="100%" dir="rtl" lang="ar"' in html
    assert f'<a href="{email_footer.SAMPLE_URL}">' in html


def test_a_transactional_test_has_no_footer(as_editor, smtp_sink):
    send_test(as_editor, version_of("shipped", "en", "email"), order="7", tracking_url="https://example.com/t/7")
    [mail] = smtp_sink.wait_for(1)
    assert email_footer.SAMPLE_URL not in mail.get_body(("plain",)).get_content()


def test_a_test_is_no_notification_and_counts_in_no_statistic(as_editor, smtp_sink):
    send_test(as_editor, version_of("shipped", "en", "email"), order="1")
    smtp_sink.wait_for(1)
    assert Notification.objects.count() == 0


def test_the_page_says_where_the_test_goes_and_the_history_shows_it(as_editor, smtp_sink):
    version = version_of("shipped", "en", "email")
    page = as_editor.get(f"/templates/{version.pk}/").content.decode()
    assert "to you only (e•••@example.com), marked [TEST]" in page
    assert 'name="param-order" maxlength="12" dir="auto" value="5012"' in page  # the kind's example, to change
    send_test(as_editor, version, order="1")
    page = as_editor.get(f"/templates/{version.pk}/").content.decode()
    assert "Sent shipped/en/email v1 to you (e•••@example.com), marked [TEST]" in page
    assert re.search(r"<strong>editor</strong>\s+test sent to self .*\(email to e•••@example.com\)", page)


def test_an_address_in_the_request_is_ignored(as_editor, smtp_sink):
    version = version_of("shipped", "en", "email")
    as_editor.post(f"/templates/{version.pk}/test/", {"param-order": "1", "to": "victim@example.net"})
    [mail] = smtp_sink.wait_for(1)
    assert mail["To"] == "editor@example.com"


def test_without_an_email_address_the_test_is_refused_with_the_reason(as_editor, editor):
    editor.email = ""
    editor.save()
    response = send_test(as_editor, version_of("shipped", "en", "email"), order="1")
    assert response.status_code == 400
    assert "Your account has no email address: ask an administrator to add it." in response.content.decode()
    assert not TemplateEvent.objects.filter(action=TemplateEvent.Action.TEST).exists()


# --- by SMS and in-app, to the staff contact an administrator set ----------------------------------------------------


def test_an_sms_test_goes_to_the_staff_members_own_phone(as_editor, editor, stub_providers):
    StaffContact.objects.create(user=editor, phone="+14155550199")
    response = send_test(as_editor, version_of("shipped", "en", "sms"), order="A-1")
    assert response.status_code == 302
    [message] = stub_providers.state.messages
    assert (message["provider"], message["to"], message["text"]) == (
        "twilio", "+14155550199", "[TEST] Your order A-1 has shipped.",
    )  # fmt: skip


def test_an_sms_test_without_a_phone_is_refused(as_editor, stub_providers):
    response = send_test(as_editor, version_of("shipped", "en", "sms"), order="A-1")
    assert response.status_code == 400
    assert "Your account has no phone number: ask an administrator to add it" in response.content.decode()
    assert stub_providers.state.messages == []


def test_an_inapp_test_lands_in_the_staff_members_inbox_marked(as_editor, editor):
    StaffContact.objects.create(user=editor, inbox_user_id="u-en-1")
    version = version_of("promo", "en", "inapp")
    assert send_test(as_editor, version, percent="35").status_code == 302
    message = InboxMessage.objects.get()
    assert (message.title, message.notification_id, message.recipient.user_id) == (
        "[TEST] 35% off this weekend",
        None,
        "u-en-1",
    )


def test_a_push_test_is_refused(as_editor):
    response = send_test(as_editor, version_of("shipped", "en", "push"), order="1")
    assert response.status_code == 400
    assert "push needs a device and is not offered" in response.content.decode()


def test_a_staff_phone_must_be_e164():
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match=r"E\.164"):
        StaffContact(phone="0501234567").full_clean(exclude=["user"])


# --- secret params ---------------------------------------------------------------------------------------------------


def test_a_secret_param_is_sent_but_masked_in_the_history_and_never_shown_again(as_editor, smtp_sink):
    version = version_of("otp", "en", "email")
    page = as_editor.get(f"/templates/{version.pk}/").content.decode()
    assert 'name="param-code" maxlength="8" dir="auto" type="password" autocomplete="off">' in page
    assert send_test(as_editor, version, code="771177").status_code == 302
    [mail] = smtp_sink.wait_for(1)
    assert "Your code is 771177." in mail.get_body(("plain",)).get_content()
    assert version.events.get(action=TemplateEvent.Action.TEST).detail["params"] == {"code": MASK}
    assert "771177" not in as_editor.get(f"/templates/{version.pk}/").content.decode()


def test_a_refused_test_does_not_echo_the_secret(as_editor):
    response = send_test(as_editor, version_of("otp", "en", "email"), code="123456789")  # 9 > max_length 8
    assert response.status_code == 400
    assert "code: at most 8 characters." in response.content.decode()
    assert "123456789" not in response.content.decode()


# --- typed values are validated --------------------------------------------------------------------------------------


def test_a_value_longer_than_the_kind_declares_is_refused(as_editor):
    response = send_test(as_editor, version_of("shipped", "en", "email"), order="1234567890123")
    assert response.status_code == 400
    assert "order: at most 12 characters." in response.content.decode()
    assert 'value="1234567890123"' in response.content.decode()  # not secret: shown again to correct


def test_a_missing_param_is_named(as_editor):
    response = send_test(as_editor, version_of("shipped", "en", "email"))
    assert response.status_code == 400
    assert "does not render with these values: missing params: order" in response.content.decode()


def test_a_list_param_is_typed_as_json(editor, smtp_sink):
    version = version_of("digest", "en", "email")
    sent = send_to_self.send_test_to_self(version, editor, {"items": '["one", "two"]', "count": "2"})
    assert sent.to == "e•••@example.com"
    [mail] = smtp_sink.wait_for(1)
    assert "- one\r\n- two" in mail.get_body(("plain",)).get_content()
    with pytest.raises(send_to_self.TestRefused, match=r"items: type a JSON list of texts"):
        send_to_self.send_test_to_self(version, editor, {"items": "one, two", "count": "2"})
    # Nested past the JSON parser's recursion limit: refused as any other text, not a 500.
    with pytest.raises(send_to_self.TestRefused, match=r"items: type a JSON list of texts"):
        send_to_self.send_test_to_self(version, editor, {"items": "[" * 1_999, "count": "2"})


def test_an_undeclared_param_is_refused_by_the_action(editor):
    with pytest.raises(send_to_self.TestRefused, match="shipped has no param evil"):
        send_to_self.checked_params(version_of("shipped", "en", "email"), {"evil": "x"})


# --- abuse: throttled, role-checked, CSRF-protected ------------------------------------------------------------------


def test_tests_are_throttled_per_person_with_the_time_to_wait(as_editor, smtp_sink):
    version = version_of("shipped", "en", "email")
    with time_machine.travel(NOW, tick=False) as traveller:
        for _ in range(send_to_self.TEST_LIMIT):
            assert send_test(as_editor, version, order="1").status_code == 302
            traveller.shift(timedelta(minutes=1))
        response = send_test(as_editor, version, order="1")
        assert response.status_code == 429
        assert "You sent 5 tests in the last 10 minutes: try again in 5 minutes." in response.content.decode()
        traveller.shift(timedelta(minutes=5, seconds=1))
        assert send_test(as_editor, version, order="1").status_code == 302
    assert len(smtp_sink.wait_for(6)) == 6


@pytest.mark.parametrize("persona", ["outsider", "marketer"])
def test_who_neither_writes_nor_approves_templates_may_not_send_tests(client, persona, request, smtp_sink):
    client.force_login(request.getfixturevalue(persona))
    assert send_test(client, version_of("shipped", "en", "email"), order="1").status_code == 403
    assert smtp_sink.messages() == []


def test_an_approver_may_send_a_test_to_themselves(client, approver, smtp_sink):
    client.force_login(approver)
    assert send_test(client, version_of("shipped", "en", "email"), order="1").status_code == 302
    assert smtp_sink.wait_for(1)[0]["To"] == "approver@example.com"


def test_the_action_refuses_who_may_not_test(outsider):
    with pytest.raises(send_to_self.TestRefused, match=r"support may not send tests of templates\.") as refused:
        send_to_self.send_test_to_self(version_of("shipped", "en", "email"), outsider, {"order": "1"})
    assert refused.value.status == 403


def test_a_test_needs_the_csrf_token(editor, smtp_sink):
    client = Client(enforce_csrf_checks=True)
    client.force_login(editor)
    assert send_test(client, version_of("shipped", "en", "email"), order="1").status_code == 403
    assert smtp_sink.messages() == []


def test_a_provider_refusal_is_recorded_and_answered_502(as_editor, smtp_sink):
    smtp_sink.rules.replies["editor@example.com"] = "550 5.1.1 mailbox unavailable"
    version = version_of("otp", "en", "email")
    response = send_test(as_editor, version, code="550550")
    assert response.status_code == 502
    assert "The test was not sent: SMTP 550" in response.content.decode()
    event = version.events.get(action=TemplateEvent.Action.TEST)
    assert event.detail["error"].startswith("SMTP 550") and "550550" not in str(event.detail)


def test_an_unknown_version_is_a_404(as_editor):
    assert as_editor.post("/templates/999999/test/", {}).status_code == 404
