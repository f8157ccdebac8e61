"""The providers file: which providers serve which channel, in which order, at which rate.

Named by ``NOTIFY_PROVIDERS_FILE`` (TOML). Without it, each channel is served
by the one provider of ``NOTIFY["CHANNEL_PROVIDERS"]`` (the embedded default:
smtp, fake-sms, fake-push) with no budget. README documents the format::

    [channels]
    sms = ["twilio", "vonage"]      # order matters: primary first, then the backup
    push = ["fcm", "webpush"]       # push picks by the device's platform

    [providers.twilio]
    type = "twilio"                 # the adapter (providers/<type>.py)
    base_url = "https://api.twilio.com"
    account_sid = "AC…"
    auth_token_env = "TWILIO_AUTH_TOKEN"   # any option ending in _env is read from that variable
    from = "+15005550006"
    rate = 100          # messages per second, shared by every worker (token bucket in Redis)
    burst = 100         # bucket size, messages
    high_share = 0.3    # fraction of rate reserved for the high tier; standard never spends it
    concurrency = 20    # calls in flight at once, all workers together (bulkhead)
    timeout = 5.0       # seconds per call
"""

import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

_GENERAL = {"type", "rate", "burst", "high_share", "concurrency", "timeout"}

# A provider's name is a label in Redis keys and fields ("|" separates a metric counter's labels, sent-markers
# hold "provider|reference"), in Prometheus and in the attempt rows: lowercase letters, digits, ".", "_", "-".
_NAME = re.compile(r"\A[a-z0-9][a-z0-9._-]{0,31}\Z")


class ProvidersFileError(ValueError):
    """The providers file is missing, unreadable, or says something that cannot work."""


@dataclass(frozen=True, eq=False)
class ProviderConfig:
    """One configured provider. ``rate`` is messages/second (None: no budget); ``timeout`` seconds."""

    name: str
    type: str
    rate: float | None = None
    burst: float | None = None
    high_share: float = 0.0
    concurrency: int | None = None
    timeout: float = 10.0
    options: dict[str, Any] = field(default_factory=dict)

    def option(self, key: str, default: Any = None) -> Any:
        return self.options.get(key, default)


@dataclass(frozen=True)
class ProvidersConfig:
    """``routes`` maps a channel to its provider names in order; ``providers`` names to configs."""

    routes: dict[str, list[str]]
    providers: dict[str, ProviderConfig]


def _resolve_env(options: dict[str, Any], name: str) -> dict[str, Any]:
    resolved = {}
    for key, value in options.items():
        if key.endswith("_env"):
            if value not in os.environ:
                raise ProvidersFileError(f"provider {name!r}: {key} names ${value}, which is not set")
            resolved[key.removesuffix("_env")] = os.environ[value]
        else:
            resolved[key] = value
    return resolved


def _provider(name: str, table: dict[str, Any]) -> ProviderConfig:
    if not _NAME.match(name):
        raise ProvidersFileError(
            f"provider {name!r}: a name is 1 to 32 lowercase letters, digits, '.', '_' or '-' (e.g. twilio-backup)"
        )
    options = _resolve_env({k: v for k, v in table.items() if k not in _GENERAL}, name)
    try:
        share = float(table.get("high_share", 0.0))
        config = ProviderConfig(
            name=name,
            type=str(table.get("type", name)),
            rate=float(table["rate"]) if "rate" in table else None,
            burst=float(table["burst"]) if "burst" in table else None,
            high_share=share,
            concurrency=int(table["concurrency"]) if "concurrency" in table else None,
            timeout=float(table.get("timeout", 10.0)),
            options=options,
        )
    except (TypeError, ValueError) as exc:
        raise ProvidersFileError(f"provider {name!r}: {exc}") from None
    if not 0.0 <= share < 1.0:
        raise ProvidersFileError(f"provider {name!r}: high_share must be in [0, 1), got {share}")
    base_url = options.get("base_url")
    if base_url is not None and not _is_http_url(base_url):
        # Without a scheme, libcurl would guess http:// and send the credentials in clear text.
        raise ProvidersFileError(
            f"provider {name!r}: base_url must be an http(s) URL such as https://api.twilio.com, got {base_url!r}"
        )
    return config


def _is_http_url(value: Any) -> bool:
    parts = urlsplit(value) if isinstance(value, str) else None
    return parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname)


def _default() -> ProvidersConfig:
    return _default_for(tuple(sorted(settings.NOTIFY["CHANNEL_PROVIDERS"].items())))


@lru_cache(maxsize=8)
def _default_for(channel_providers: tuple[tuple[str, str], ...]) -> ProvidersConfig:
    names = {channel: name for channel, name in channel_providers if name}
    return ProvidersConfig(
        routes={channel: [name] for channel, name in names.items()},
        providers={name: ProviderConfig(name=name, type=name) for name in names.values()},
    )


@lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> ProvidersConfig:
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProvidersFileError(f"{path}: {exc}") from None
    default = _default()
    providers = dict(default.providers)
    providers.update({name: _provider(name, table) for name, table in data.get("providers", {}).items()})
    routes = {**default.routes, **{channel: list(names) for channel, names in data.get("channels", {}).items()}}
    for channel, names in routes.items():
        for name in names:
            if name not in providers:
                raise ProvidersFileError(f"{path}: channel {channel!r} names provider {name!r}, which is not defined")
    return ProvidersConfig(routes=routes, providers=providers)


def providers_config() -> ProvidersConfig:
    """The providers in force: the file's (re-read when it changes) or the embedded default."""
    path = settings.NOTIFY.get("PROVIDERS_FILE")
    if not path:
        return _default()
    try:
        mtime = os.stat(path).st_mtime
    except OSError as exc:
        raise ProvidersFileError(f"NOTIFY_PROVIDERS_FILE={path}: {exc.strerror}") from None
    return _load(path, mtime)
