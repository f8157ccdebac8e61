"""Optional DKIM signing of outgoing mail (RFC 6376) with dkimpy.

RFC 8058 §4 wants ``List-Unsubscribe`` and ``List-Unsubscribe-Post`` covered by a valid DKIM
signature, or receivers ignore the one-click header. With ``NOTIFY_DKIM_DOMAIN``,
``NOTIFY_DKIM_SELECTOR`` and the private key (``NOTIFY_DKIM_PRIVATE_KEY``, PEM, or
``NOTIFY_DKIM_PRIVATE_KEY_FILE``) set, every mail the SMTP provider sends is signed with
rsa-sha256, relaxed/relaxed canonicalization (a relay may re-fold headers), over ``SIGNED_HEADERS``.
Without them mail goes unsigned, as before; the public key is published at
``<selector>._domainkey.<domain>`` (README, "Email: DKIM").
"""

from collections.abc import Callable

import dkim
from django.conf import settings

# Listed even when absent: signing an absent header forbids adding it later ("oversigning",
# RFC 6376 §5.4.2), so a relay cannot attach an unsubscribe URL of its own to a signed mail.
SIGNED_HEADERS = (
    b"From", b"To", b"Subject", b"Date", b"Message-ID", b"List-Unsubscribe", b"List-Unsubscribe-Post",
    b"MIME-Version", b"Content-Type",
)  # fmt: skip


class DkimSettings:
    """The configured domain, selector and PEM private key (bytes); ``enabled`` when all three are set."""

    def __init__(self, config: dict):
        self.domain = config.get("DOMAIN", "")
        self.selector = config.get("SELECTOR", "")
        self.private_key = config.get("PRIVATE_KEY", "").encode()

    @property
    def enabled(self) -> bool:
        return bool(self.domain and self.selector and self.private_key)


_PROBE = b"From: probe@example.com\r\nSubject: probe\r\n\r\nprobe\r\n"


def configuration_problem(config: DkimSettings) -> str:
    """Why DKIM as configured cannot work ("" when it can, or when it is off): a part missing, an unusable key."""
    given = [bool(config.domain), bool(config.selector), bool(config.private_key)]
    if not any(given):
        return ""
    if not all(given):
        return "DKIM needs all of NOTIFY_DKIM_DOMAIN, NOTIFY_DKIM_SELECTOR and NOTIFY_DKIM_PRIVATE_KEY(_FILE)."
    problem = _key_problem(config)
    return f"DKIM cannot sign with NOTIFY_DKIM_PRIVATE_KEY: {problem}" if problem else ""


def _key_problem(config: DkimSettings) -> str:
    try:
        signature(_PROBE, config)
    except (dkim.DKIMException, ValueError) as exc:
        return str(exc) or exc.__class__.__name__
    return ""


def current() -> DkimSettings:
    """The DKIM settings in force (``settings.NOTIFY["DKIM"]``)."""
    return DkimSettings(settings.NOTIFY["DKIM"])


def signature(message: bytes, config: DkimSettings) -> bytes:
    """The ``DKIM-Signature:`` header line (CRLF-terminated) for ``message`` (CRLF line ends).

    Raises ``dkim.DKIMException`` when the key or the message is malformed.
    """
    return dkim.sign(
        message,
        config.selector.encode(),
        config.domain.encode(),
        config.private_key,
        canonicalize=(b"relaxed", b"relaxed"),
        include_headers=list(SIGNED_HEADERS),
    )


class SignedMessage:
    """What Django's SMTP backend sends: a built MIME message with the signature put in front of it."""

    def __init__(self, message, config: DkimSettings):
        self._message = message
        self._config = config

    def as_bytes(self, linesep: str = "\r\n") -> bytes:
        """The message as sent, ``DKIM-Signature:`` first; the signature covers exactly these bytes."""
        raw = self._message.as_bytes(linesep=linesep)
        return signature(raw, self._config) + raw


def signing(build: Callable[[], object]) -> Callable[[], object]:
    """Wrap an ``EmailMessage.message`` so that what it builds is signed when DKIM is configured."""

    def message():
        config = current()
        built = build()
        return SignedMessage(built, config) if config.enabled else built

    return message
