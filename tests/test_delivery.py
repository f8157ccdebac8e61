"""A worker's delivery of one notification through a real SMTP server."""

import pytest

from backend.notifications.delivery import dispatch
from backend.notifications.models import Attempt, Notification, State
from tests.conftest import pending

pytestmark = pytest.mark.usefixtures("demo_data")


def accepted(send, user_id="u-ar-1", key="order-5012-shipped", **extra) -> Notification:
    response = send({"user_id": user_id, "kind": "shipped", "params": {"order": "5012"}, **extra}, key=key)
    assert response.status_code == 202, response.json()
    return Notification.objects.get(pk=response.json()["id"])


def test_arabic_mail_has_rtl_html_and_a_plain_text_part(send, smtp_sink):
    notification = accepted(send)
    dispatch.deliver(str(notification.pk))

    [mail] = smtp_sink.messages()
    assert mail["To"] == "layla@example.com"
    assert mail["Subject"] == "تم شحن طلبك رقم 5012"
    assert mail["X-Notification-Id"] == str(notification.pk)
    assert mail.get_content_type() == "multipart/alternative"
    text, html = (part for part in mail.iter_parts())
    assert text.get_content_type() == "text/plain"
    assert text.get_content().strip() == "خبر سار: طلبك رقم \u20685012\u2069 في الطريق إليك."
    assert html.get_content_type() == "text/html"
    assert '<html lang="ar" dir="rtl">' in html.get_content()
    assert "<bdi>5012</bdi>" in html.get_content()

    notification.refresh_from_db()
    assert notification.state == State.SENT
    assert notification.provider == "smtp"
    assert notification.provider_ref == mail["Message-ID"] == f"<{notification.pk}@localhost>"
    [attempt] = notification.attempts.all()
    assert (attempt.number, attempt.provider, attempt.result) == (1, "smtp", Attempt.Result.SENT)
    assert attempt.provider_ref == mail["Message-ID"]
    assert attempt.latency_ms is not None
    history = list(notification.state_changes.values_list("from_state", "to_state"))
    assert history == [("", "queued"), ("queued", "sending"), ("sending", "sent")]


def test_english_mail_is_left_to_right(send, smtp_sink):
    dispatch.deliver(str(accepted(send, user_id="u-en-1").pk))
    [mail] = smtp_sink.messages()
    assert mail["Subject"] == "Your order 5012 has shipped"
    assert '<html lang="en" dir="ltr">' in mail.get_body(("html",)).get_content()


def test_persian_mail_is_in_persian_and_right_to_left(send, smtp_sink):
    dispatch.deliver(str(accepted(send, user_id="u-fa-1").pk))
    [mail] = smtp_sink.messages()
    assert (mail["To"], mail["Subject"]) == ("dariush@example.com", "سفارش 5012 شما ارسال شد")
    assert mail.get_body(("plain",)).get_content().strip() == "خبر خوب: سفارش شماره \u20685012\u2069 شما در راه است."
    html = mail.get_body(("html",)).get_content()
    assert '<html lang="fa" dir="rtl">' in html
    assert "<bdi>5012</bdi>" in html


def test_a_second_delivery_of_the_same_id_sends_nothing(send, smtp_sink):
    notification = accepted(send)
    dispatch.deliver(str(notification.pk))
    dispatch.deliver(str(notification.pk))
    assert len(smtp_sink.messages()) == 1
    assert notification.attempts.count() == 1


def test_a_transient_smtp_reply_is_retried_later(send, smtp_sink, django_capture_on_commit_callbacks):
    smtp_sink.rules.replies["layla@example.com"] = "451 4.3.0 Mailbox temporarily unavailable"
    notification = accepted(send)
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    assert (notification.state, notification.reason) == (State.QUEUED, "retry")
    assert notification.last_error == "SMTP 451: 4.3.0 Mailbox temporarily unavailable"
    assert notification.queued_at > notification.sending_at
    [attempt] = notification.attempts.all()
    assert attempt.result == Attempt.Result.TRANSIENT
    # The retry is a task with an ETA (the consumer holds it until then): no worker slept.
    from backend.notifications.queues import HUEYS

    [retry] = HUEYS["standard"].pending()
    assert retry.args == (str(notification.pk),)
    assert retry.eta is not None
    assert pending("high") == 0

    del smtp_sink.rules.replies["layla@example.com"]
    dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    assert notification.state == State.SENT
    assert list(notification.attempts.values_list("number", "result")) == [(1, "transient"), (2, "sent")]
    assert len(smtp_sink.messages()) == 1


def test_a_permanent_smtp_reply_fails_at_once(send, smtp_sink):
    smtp_sink.rules.replies["layla@example.com"] = "550 5.1.1 No such user"
    notification = accepted(send)
    dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    assert (notification.state, notification.reason) == (State.FAILED, "permanent-error")
    assert notification.last_error == "SMTP 550: 5.1.1 No such user"
    assert list(notification.attempts.values_list("result", flat=True)) == ["permanent"]
    # The bounce is recorded on the recipient: the next mail is not even tried.
    recipient = notification.recipient
    recipient.refresh_from_db()
    assert recipient.email_bounce == "SMTP 550: 5.1.1 No such user"
    assert recipient.email_bounced_at is not None


def test_a_full_mailbox_is_permanent_but_not_a_bounce(send, smtp_sink):
    smtp_sink.rules.replies["layla@example.com"] = "552 5.2.2 Mailbox full"
    notification = accepted(send)
    dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    assert (notification.state, notification.reason) == (State.FAILED, "permanent-error")
    notification.recipient.refresh_from_db()
    assert notification.recipient.email_bounced_at is None


def test_the_last_transient_failure_ends_failed(send, smtp_sink, settings):
    settings.NOTIFY = {**settings.NOTIFY, "MAX_ATTEMPTS": 2}
    smtp_sink.rules.replies["layla@example.com"] = "421 4.7.0 Try again later"
    notification = accepted(send)
    dispatch.deliver(str(notification.pk))
    dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    assert (notification.state, notification.reason) == (State.FAILED, "attempts-exhausted")
    assert notification.attempt_count == 2


def test_an_unreachable_relay_is_transient(send, settings):
    from backend.stubs.smtp_sink import free_port

    settings.EMAIL_PORT = free_port()  # nothing listens there
    notification = accepted(send)
    dispatch.deliver(str(notification.pk))
    notification.refresh_from_db()
    assert (notification.state, notification.reason) == (State.QUEUED, "retry")
    assert notification.last_error.startswith("SMTP connection failed: [Errno 111] Connection refused")


def test_sms_goes_through_the_configured_sms_provider(send):
    response = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "482913"}}, key="login-1")
    dispatch.deliver(response.json()["id"])
    notification = Notification.objects.get(pk=response.json()["id"])
    assert (notification.state, notification.provider) == (State.SENT, "fake-sms")
    assert notification.provider_ref.startswith("fake-sms-")
