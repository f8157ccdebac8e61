"""The provider contract and registry.

A provider takes one ``OutboundMessage`` and either returns the provider's
reference for it or raises ``ProviderError`` saying whether a retry could
help (``permanent=False``: timeouts, 429, 5xx, SMTP 4xx) or not
(``permanent=True``: invalid number, unregistered token, SMTP 5xx). The
delivery engine decides retries, budgets and failover; providers never sleep
or loop. Adapters register under their ``name`` (the ``type`` of the
providers file); an instance carries its configured name and options.
"""

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING

from backend.notifications.providers.config import ProviderConfig, providers_config

if TYPE_CHECKING:
    from backend.notifications.providers import http


class ProviderError(Exception):
    """A provider refused or failed a message.

    ``permanent``: True when the same message can never succeed (fix the
    contact data instead); ``retry_after``: seconds the provider asked us to
    wait (HTTP ``Retry-After``); ``address_invalid``: the provider says the
    address itself is dead (invalid number, unregistered token, mailbox
    gone), so it is disabled on the recipient.
    """

    def __init__(
        self, message: str, *, permanent: bool, retry_after: float | None = None, address_invalid: bool = False
    ):
        super().__init__(message)
        self.permanent = permanent
        self.retry_after = retry_after
        self.address_invalid = address_invalid


@dataclass(frozen=True)
class OutboundMessage:
    """What a provider needs to send one notification.

    ``to`` is the channel's address: an email address, an E.164 phone number
    or a device token (for Web Push the subscription endpoint, with its keys
    in ``subscription``). ``html`` is a whole document or "".
    """

    notification_id: str
    channel: str
    to: str
    subject: str
    text: str
    html: str = ""
    language: str = "en"
    headers: dict[str, str] = field(default_factory=dict)
    subscription: dict = field(default_factory=dict)


class Provider:
    """Base class of every adapter. Subclasses set ``name`` (their type) and implement ``send``."""

    name: str = ""
    channel: str = ""

    def __init__(self, config: ProviderConfig | None = None):
        self.config = config or ProviderConfig(name=self.name, type=self.name)
        self.name = self.config.name

    @property
    def timeout(self) -> float:
        """Seconds one call may take before it counts as a transient failure."""
        return self.config.timeout

    def send(self, message: OutboundMessage) -> str:
        """Hand ``message`` to the provider; return its reference or raise ``ProviderError``."""
        raise NotImplementedError

    def request(self, message: OutboundMessage) -> "http.Request | None":
        """The one HTTP POST that hands ``message`` to the provider, for a batch to send with its others.

        Adapters of an HTTP API override it (twilio, vonage, fcm) and ``reference``; the batch worker
        sends their calls concurrently (``concurrent_http``) and the others (SMTP, Web Push, the inbox,
        the fakes), for which this is None, with ``send`` in threads. May raise ``ProviderError``.
        """
        return None

    def reference(self, answer: "http.Answer") -> str:
        """The provider's reference in its ``answer`` to ``request``; raises ``ProviderError`` as ``send`` would."""
        raise NotImplementedError


_REGISTRY: dict[str, type[Provider]] = {}


def register(cls: type[Provider]) -> type[Provider]:
    """Class decorator adding an adapter to the registry under its ``name``."""
    _REGISTRY[cls.name] = cls
    return cls


@lru_cache(maxsize=64)
def _instance(config: ProviderConfig) -> Provider | None:
    cls = _REGISTRY.get(config.type)
    return cls(config) if cls is not None else None


def provider_named(name: str) -> Provider | None:
    """The configured provider called ``name``, or None."""
    config = providers_config().providers.get(name)
    return _instance(config) if config is not None else None


def providers_for_channel(channel: str) -> list[Provider]:
    """The providers serving ``channel``, in the providers file's order (primary first)."""
    names = providers_config().routes.get(channel, [])
    return [provider for provider in map(provider_named, names) if provider is not None]


def provider_for_channel(channel: str) -> Provider | None:
    """The first provider serving ``channel``, or None when the channel has none."""
    providers = providers_for_channel(channel)
    return providers[0] if providers else None
