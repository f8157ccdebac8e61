"""Email through Django's SMTP backend (a relay, an ESP's SMTP endpoint, or the demo sink).

Reply codes follow RFC 5321 §4.2.1: 4yz is a transient negative completion
(retry later), 5yz a permanent one (the address or the message is refused).
"""

import smtplib
from email.utils import parseaddr

from django.conf import settings
from django.core.mail import EmailMultiAlternatives, get_connection

from backend.notifications import email_dkim
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

# RFC 5321 §4.2.2: 550 mailbox unavailable, 551 user not local, 553 mailbox name not allowed — the
# address itself is bad. 552 (storage) and 554 (policy) refuse the message, not the mailbox.
_BAD_MAILBOX = {550, 551, 553}


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
            # This provider is SMTP whatever EMAIL_BACKEND says (Django's test runner swaps that to locmem).
            connection=get_connection("django.core.mail.backends.smtp.EmailBackend"),
        )
        if message.html:
            mail.attach_alternative(message.html, "text/html")
        mail.message = email_dkim.signing(mail.message)  # signed when NOTIFY_DKIM_* are set
        try:
            mail.send(fail_silently=False)
        except smtplib.SMTPRecipientsRefused as exc:
            code, detail = next(iter(exc.recipients.values()))
            raise _error_for_code(code, _decode(detail)) from exc
        except (smtplib.SMTPSenderRefused, smtplib.SMTPDataError) as exc:
            raise _error_for_code(exc.smtp_code, _decode(exc.smtp_error)) from exc
        except (TimeoutError, smtplib.SMTPException, OSError) as exc:
            # Connection refused, timeouts, dropped sessions: the relay may be back soon.
            raise ProviderError(f"SMTP connection failed: {exc}", permanent=False) from exc
        return message_id


def _decode(detail: bytes | str) -> str:
    return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
