"""The one place outbound provider HTTP goes through: timeouts, transport errors, private addresses.

Every adapter calls ``post()``; tests point base URLs at the local stub
server instead of patching. A connection failure or a timeout is a
transient ``ProviderError``. URLs that come from users rather than from
the operator (Web Push endpoints) are refused when they resolve to a
private, loopback or link-local address, unless
``NOTIFY_ALLOW_PRIVATE_PUSH_ENDPOINTS`` is on (SSRF, OWASP A10:2021).
"""

import ipaddress
import socket
import threading
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.utils import timezone

from backend.notifications.providers.base import ProviderError

_local = threading.local()


def session() -> requests.Session:
    """This thread's keep-alive session (requests sessions are not thread-safe)."""
    if not hasattr(_local, "session"):
        _local.session = requests.Session()
        _local.session.headers["User-Agent"] = "notify/1.0"
    return _local.session


def check_public_url(url: str, resolve: bool = True) -> None:
    """Raise a permanent ``ProviderError`` when ``url`` is not https/http or points at a non-public address.

    ``resolve`` False checks only what the URL itself says (a literal IP, localhost), without DNS: for
    registering a device, where a lookup failure must not refuse it; the send path resolves.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ProviderError(f"refused URL {url!r}: not an http(s) URL", permanent=True, address_invalid=True)
    if settings.NOTIFY["ALLOW_PRIVATE_PUSH_ENDPOINTS"]:
        return
    if resolve:
        try:
            infos = socket.getaddrinfo(parts.hostname, parts.port or 443, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise ProviderError(f"cannot resolve {parts.hostname}: {exc}", permanent=False) from exc
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    elif parts.hostname == "localhost":
        addresses = [ipaddress.ip_address("127.0.0.1")]
    else:
        try:
            addresses = [ipaddress.ip_address(parts.hostname)]
        except ValueError:
            return  # a name: checked when a message is sent
    for address in addresses:
        if not address.is_global:
            raise ProviderError(
                f"refused URL {url!r}: {parts.hostname} resolves to the non-public address {address}",
                permanent=True,
                address_invalid=True,
            )


def retry_after_seconds(response: requests.Response) -> float | None:
    """``Retry-After`` in seconds (RFC 9110 §10.2.3: delay-seconds or an HTTP-date), or None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    if value.strip().isdigit():
        return float(value)
    try:
        return max(0.0, (parsedate_to_datetime(value) - timezone.now()).total_seconds())
    except (TypeError, ValueError):
        return None


def post(url: str, *, timeout: float, **kwargs) -> requests.Response:
    """POST with a timeout (seconds); transport failures become transient ``ProviderError``s."""
    try:
        return session().post(url, timeout=timeout, **kwargs)
    except requests.Timeout as exc:
        raise ProviderError(f"timed out after {timeout:g} s: {url}", permanent=False) from exc
    except requests.RequestException as exc:
        raise ProviderError(f"connection failed: {exc.__class__.__name__}: {url}", permanent=False) from exc


def transient_for_status(provider: str, response: requests.Response) -> ProviderError | None:
    """The transient error for 429 and 5xx answers (honouring Retry-After), else None."""
    if response.status_code == 429 or response.status_code >= 500:
        return ProviderError(
            f"{provider} answered HTTP {response.status_code}: {response.text[:200]}",
            permanent=False,
            retry_after=retry_after_seconds(response),
        )
    return None
