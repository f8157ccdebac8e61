"""Email through Django's SMTP backend (a relay, an ESP's SMTP endpoint, or the demo sink).

Reply codes follow RFC 5321 §4.2.1: 4yz is a transient negative completion
(retry later), 5yz a permanent one (the address or the message is refused).

Each thread keeps one SMTP session open and sends message after message on it
(a batch worker's calls run in a few threads), checking it with ``NOOP`` first
(RFC 5321 §4.1.1.9): a relay that dropped an idle session costs a reconnect,
never a message. A session that failed in any way is closed, not reused.
"""

import smtplib
import threading
from email.utils import parseaddr

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection

from backend.notifications import email_dkim
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

# RFC 5321 §4.2.2: 550 mailbox unavailable, 551 user not local, 553 mailbox name not allowed — the
# address itself is bad. 552 (storage) and 554 (policy) refuse the message, not the mailbox.
_BAD_MAILBOX = {550, 551, 553}

_local = threading.local()


def _session():
    """This thread's open SMTP connection (Django's SMTP backend) for the configured relay, opened when needed."""
    key = (settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_HOST_USER, settings.EMAIL_USE_TLS)
    connection = getattr(_local, "connection", None)
    if connection is not None and _local.key == key and _alive(connection):
        return connection
    _drop()
    # This provider is SMTP whatever EMAIL_BACKEND says (Django's test runner swaps that to locmem).
    connection = get_connection("django.core.mail.backends.smtp.EmailBackend")
    connection.open()
    _local.connection, _local.key = connection, key
    return connection


def _alive(connection) -> bool:
    try:
        return connection.connection is not None and connection.connection.noop()[0] == 250
    except (smtplib.SMTPException, OSError):
        return False


def _drop() -> None:
    """Close this thread's session, if any (quietly: it may be dead already)."""
    connection = getattr(_local, "connection", None)
    _local.connection = None
    if connection is not None:
        connection.fail_silently = True
        connection.close()


def _error_for_code(code: int, detail: str) -> ProviderError:
    permanent = 500 <= code < 600
    # Enhanced status 5.1.x is an addressing failure too (RFC 3463 §3.2).
    bounced = permanent and (code in _BAD_MAILBOX or detail.startswith("5.1."))
    return ProviderError(f"SMTP {code}: {detail}", permanent=permanent, address_invalid=bounced)


@register
class SmtpProvider(Provider):
    """Sends a multipart/alternative mail: text/plain first, then text/html."""

    name = "smtp"
    channel = "email"

    def send(self, message: OutboundMessage) -> str:
        # One Message-ID per notification, not per attempt: a duplicate sent
        # after a worker crash carries the same id, which lets clients fold it.
        domain = parseaddr(settings.DEFAULT_FROM_EMAIL)[1].rpartition("@")[2] or "localhost"
        message_id = f"<{message.notification_id}@{domain}>"
        mail = EmailMultiAlternatives(
            subject=message.subject,
            body=message.text,
            to=[message.to],
            headers={"Message-ID": message_id, "X-Notification-Id": message.notification_id, **message.headers},
        )
        if message.html:
            mail.attach_alternative(message.html, "text/html")
        mail.message = email_dkim.signing(mail.message)  # signed when NOTIFY_DKIM_* are set
        try:
            _send(mail)
        except smtplib.SMTPRecipientsRefused as exc:
            code, detail = next(iter(exc.recipients.values()))
            raise _error_for_code(code, _decode(detail)) from exc
        except (smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as exc:
            raise _error_for_code(exc.smtp_code, _decode(exc.smtp_error)) from exc
        except (TimeoutError, smtplib.SMTPException, OSError) as exc:
            # Connection refused, timeouts, dropped sessions: the relay may be back soon.
            raise ProviderError(f"SMTP connection failed: {exc}", permanent=False) from exc
        return message_id


def _send(mail: EmailMultiAlternatives) -> None:
    """Send ``mail`` on this thread's session; any failure closes the session (the next message opens another)."""
    try:
        mail.connection = _session()
        mail.send(fail_silently=False)
    except BaseException:
        _drop()
        raise


def _decode(detail: bytes | str) -> str:
    return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
