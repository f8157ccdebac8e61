"""The provider contract and registry.

A provider takes one ``OutboundMessage`` and either returns the provider's
reference for it or raises ``ProviderError`` saying whether a retry could
help (``permanent=False``: timeouts, 429, 5xx, SMTP 4xx) or not
(``permanent=True``: invalid number, unregistered token, SMTP 5xx). The
delivery engine decides retries; providers never sleep or loop.
"""

from dataclasses import dataclass, field

from django.conf import settings


class ProviderError(Exception):
    """A provider refused or failed a message.

    ``permanent``: True when the same message can never succeed (fix the
    contact data instead); ``retry_after``: seconds the provider asked us to
    wait, when it said so (HTTP ``Retry-After``).
    """

    def __init__(self, message: str, *, permanent: bool, retry_after: float | None = None):
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after


@dataclass(frozen=True)
class OutboundMessage:
    """What a provider needs to send one notification.

    ``to`` is the channel's address: an email address, an E.164 phone number
    or a device token. ``html`` is a whole document or "".
    """

    notification_id: str
    channel: str
    to: str
    subject: str
    text: str
    html: str = ""
    language: str = "en"
    headers: dict[str, str] = field(default_factory=dict)


class Provider:
    """Base class of every provider adapter. Subclasses set ``name`` and implement ``send``."""

    name: str = ""
    channel: str = ""

    def send(self, message: OutboundMessage) -> str:
        """Hand ``message`` to the provider; return its reference or raise ``ProviderError``."""
        raise NotImplementedError


_REGISTRY: dict[str, type[Provider]] = {}


def register(cls: type[Provider]) -> type[Provider]:
    """Class decorator adding a provider to the registry under its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


def provider_for_channel(channel: str) -> Provider | None:
    """The provider configured for ``channel`` in ``NOTIFY["CHANNEL_PROVIDERS"]``, or None.

    Adapters register themselves when their module is imported; apps import
    theirs in ``AppConfig.ready()``.
    """
    name = settings.NOTIFY["CHANNEL_PROVIDERS"].get(channel)
    cls = _REGISTRY.get(name or "")
    return cls() if cls is not None else None
