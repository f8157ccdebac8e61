"""The one place outbound provider HTTP goes through: timeouts, transport errors, private addresses, redirects.

Every adapter calls ``post()`` (URLs the operator configured) or
``post_public()`` (URLs that come from users: Web Push endpoints); an adapter
of an operator's HTTP API builds its call once as a ``Request``, which
``send()`` posts alone and ``concurrent_http`` with a batch's others; tests point
base URLs at the local stub server instead of patching. A connection failure
or a timeout is a transient ``ProviderError``. Neither follows redirects: a
3xx comes back to the adapter as an answer.

User URLs are an SSRF risk (OWASP A10:2021), so ``post_public()`` resolves
the host once, refuses it when any of its addresses is not public (unless
``NOTIFY_ALLOW_PRIVATE_PUSH_ENDPOINTS`` is on: the demo's and the tests'
local stub), and connects to the address it checked, keeping the name for
the ``Host`` header, TLS SNI and the certificate check. Resolving again at
connect time would let a name that changes its answer between the two
lookups (DNS rebinding) reach loopback.
"""

import base64
import ipaddress
import json
import socket
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from urllib.parse import SplitResult, urlencode, urlsplit, urlunsplit

import requests
from django.conf import settings
from django.utils import timezone
from requests.adapters import HTTPAdapter

from backend.notifications.providers.base import ProviderError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_local = threading.local()


def session() -> requests.Session:
    """This thread's keep-alive session for operator URLs (requests sessions are not thread-safe)."""
    if not hasattr(_local, "session"):
        _local.session = requests.Session()
        _local.session.headers["User-Agent"] = "notify/1.0"
    return _local.session


class PinnedAddressAdapter(HTTPAdapter):
    """Connects to the IP address in the request's URL; TLS uses the name in its ``Host`` header.

    ``post_public()`` puts the checked address in the URL, so the connection
    never resolves the name again; for https the name goes into SNI and is
    what the certificate must match (urllib3's ``server_hostname`` and
    ``assert_hostname``, which are also part of the pool key, so a kept-alive
    connection is only reused for the same address and name).
    """

    def build_connection_pool_key_attributes(self, request, verify, cert=None):
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        if host_params["scheme"] == "https":
            name = urlsplit("//" + request.headers["Host"]).hostname
            pool_kwargs["server_hostname"] = name
            pool_kwargs["assert_hostname"] = name
        return host_params, pool_kwargs


def pinned_session() -> requests.Session:
    """This thread's session for user URLs: pinned addresses, no proxies from the environment.

    ``trust_env`` is off because a proxy would resolve the name itself, after our check.
    """
    if not hasattr(_local, "pinned_session"):
        pinned = requests.Session()
        pinned.trust_env = False
        pinned.headers["User-Agent"] = "notify/1.0"
        adapter = PinnedAddressAdapter()
        pinned.mount("http://", adapter)
        pinned.mount("https://", adapter)
        _local.pinned_session = pinned
    return _local.pinned_session


def is_public(address: IPAddress) -> bool:
    """True when ``address`` is a globally routable unicast address (IANA special-purpose registries).

    Refused: loopback, private, shared (100.64/10), link-local, multicast, reserved, unspecified
    (0.0.0.0, ::), documentation ranges, IPv6 forms that embed such an IPv4 address (IPv4-mapped
    ::ffff:127.0.0.1, 6to4 2002:7f00:1::), the rest of ::/8 (IPv4-compatible, NAT64: reserved), and
    IPv6 site-local fec0::/10 (deprecated by RFC 3879, yet still a private range on some networks).
    """
    if isinstance(address, ipaddress.IPv6Address):
        # Checked by hand: what ipaddress says of ::ffff:a.b.c.d changed in Python 3.13, and 6to4 is "global".
        embedded = address.ipv4_mapped or address.sixtofour
        if (embedded is not None and not is_public(embedded)) or address.is_site_local:
            return False
    return address.is_global and not (
        address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or address.is_loopback
        or address.is_link_local
        or address.is_private
    )


def _refused(url: str, reason: str) -> ProviderError:
    return ProviderError(f"refused URL {url!r}: {reason}", permanent=True, address_invalid=True)


def _http_parts(url: str) -> SplitResult:
    """``url`` split, when it is http(s) with a host and a valid port; else a permanent ``ProviderError``."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise _refused(url, "not an http(s) URL")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
        parts.hostname.encode("idna")
    except (ValueError, UnicodeError) as exc:
        raise _refused(url, f"bad host or port ({exc})") from exc
    return parts


def _port(parts: SplitResult) -> int:
    """The URL's port, else its scheme's default."""
    return parts.port or (443 if parts.scheme == "https" else 80)


def _resolve(parts: SplitResult) -> list[IPAddress]:
    """Every address the URL's host resolves to, in the resolver's order; a lookup failure is transient."""
    host = parts.hostname.encode("idna").decode("ascii")
    try:
        infos = socket.getaddrinfo(host, _port(parts), type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ProviderError(f"cannot resolve {parts.hostname}: {exc}", permanent=False) from exc
    return [ipaddress.ip_address(info[4][0]) for info in infos]


def _literal(parts: SplitResult) -> list[IPAddress]:
    """What the URL alone says about its address (a literal IP, localhost), without DNS."""
    if parts.hostname == "localhost" or parts.hostname.endswith(".localhost"):
        return [ipaddress.ip_address("127.0.0.1")]
    try:
        return [ipaddress.ip_address(parts.hostname)]
    except ValueError:
        return []  # a name: checked when a message is sent


def check_public_url(url: str, resolve: bool = True) -> list[IPAddress]:
    """The addresses of ``url``'s host, after refusing a non-http(s) URL or one that reaches a non-public address.

    Raises a permanent ``ProviderError`` (``address_invalid``) when the URL is
    not http(s) or ANY of its addresses is not public (``is_public``) and
    ``NOTIFY_ALLOW_PRIVATE_PUSH_ENDPOINTS`` is off; a transient one when the
    name does not resolve. ``resolve`` False checks only what the URL itself
    says (a literal IP, localhost), without DNS: for registering a device,
    where a lookup failure must not refuse it; then the list may be empty.
    """
    parts = _http_parts(url)
    addresses = _resolve(parts) if resolve else _literal(parts)
    if not settings.NOTIFY["ALLOW_PRIVATE_PUSH_ENDPOINTS"]:
        for address in addresses:
            if not is_public(address):
                raise _refused(url, f"{parts.hostname} resolves to the non-public address {address}")
    return addresses


def _host_header(parts: SplitResult) -> str:
    """The ``Host`` header for ``parts`` (RFC 9110 §7.2): the name, and the port when it is not the default."""
    host = parts.hostname.encode("idna").decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    default = 443 if parts.scheme == "https" else 80
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


def post_public(url: str, *, timeout: float, headers: dict[str, str] | None = None, **kwargs) -> requests.Response:
    """POST to a user-supplied URL: checked once, connected to the checked address, redirects not followed.

    ``timeout`` in seconds. Raises ``ProviderError``: permanent for a refused URL
    (``check_public_url``), transient for a lookup or transport failure. A 3xx
    answer is returned as it is: the caller decides what it means.
    """
    parts = _http_parts(url)
    address = check_public_url(url)[0]
    netloc = f"[{address}]:{_port(parts)}" if address.version == 6 else f"{address}:{_port(parts)}"
    pinned = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    headers = {**(headers or {}), "Host": _host_header(parts)}
    return _send(pinned_session(), url, pinned, timeout=timeout, headers=headers, **kwargs)


def post(url: str, *, timeout: float, **kwargs) -> requests.Response:
    """POST to an operator-configured URL with a timeout (seconds); redirects are not followed.

    Transport failures become transient ``ProviderError``s.
    """
    return _send(session(), url, url, timeout=timeout, **kwargs)


def _send(client: requests.Session, shown: str, url: str, *, timeout: float, **kwargs) -> requests.Response:
    try:
        return client.post(url, timeout=timeout, allow_redirects=False, **kwargs)
    except requests.Timeout as exc:
        raise ProviderError(f"timed out after {timeout:g} s: {shown}", permanent=False) from exc
    except requests.RequestException as exc:
        raise ProviderError(f"connection failed: {exc.__class__.__name__}: {shown}", permanent=False) from exc


@dataclass(frozen=True)
class Request:
    """One POST an adapter makes, encoded: ``body`` bytes with their ``Content-Type`` among ``headers``.

    ``timeout`` in seconds for the whole call. Built once by the adapter (``Provider.request``) and sent
    by either transport: ``send()`` (one call, ``requests``) or ``concurrent_http.Transport`` (a batch's).
    """

    url: str
    body: bytes = field(repr=False)  # an OTP's text, an API secret in a form
    headers: dict[str, str] = field(repr=False)  # credentials
    timeout: float


def form_request(
    url: str, form: Mapping[str, str], *, timeout: float, headers: Mapping[str, str] | None = None
) -> Request:
    """A POST of ``form`` as ``application/x-www-form-urlencoded`` (UTF-8, as a browser or ``requests`` encodes it)."""
    body = urlencode(form).encode("ascii")
    return Request(url, body, {**(headers or {}), "Content-Type": "application/x-www-form-urlencoded"}, timeout)


def json_request(url: str, body: object, *, timeout: float, headers: Mapping[str, str] | None = None) -> Request:
    """A POST of ``body`` as ``application/json`` (RFC 8259 §8.1), non-ASCII escaped as ``requests`` sends it."""
    encoded = json.dumps(body).encode("ascii")
    return Request(url, encoded, {**(headers or {}), "Content-Type": "application/json"}, timeout)


def basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` header value of HTTP basic auth for ``user`` and ``password`` (RFC 7617 §2, UTF-8)."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def send(request: Request) -> requests.Response:
    """``post()`` of an adapter's ``request``: one call, on this thread's kept-alive session."""
    return post(request.url, data=request.body, headers=request.headers, timeout=request.timeout)


@dataclass(frozen=True)
class Answer:
    """An HTTP answer read whole by ``concurrent_http``, shaped like the parts of ``requests.Response`` adapters use.

    ``headers`` is case-insensitive, as ``requests.Response.headers``.
    """

    status_code: int
    text: str
    headers: Mapping[str, str]

    def json(self):
        """The body parsed as JSON; raises ``ValueError`` when it is not JSON."""
        return json.loads(self.text)


def retry_after_seconds(response: requests.Response | Answer) -> float | None:
    """``Retry-After`` in seconds (RFC 9110 §10.2.3: delay-seconds or an HTTP-date), or None."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    if value.strip().isascii() and value.strip().isdigit():  # a provider's "²" is no number to float()
        return float(value)
    try:
        return max(0.0, (parsedate_to_datetime(value) - timezone.now()).total_seconds())
    except (TypeError, ValueError):
        return None


def transient_for_status(provider: str, response: requests.Response | Answer) -> ProviderError | None:
    """The transient error for 429 and 5xx answers (honouring Retry-After), else None."""
    if response.status_code == 429 or response.status_code >= 500:
        return ProviderError(
            f"{provider} answered HTTP {response.status_code}: {response.text[:200]}",
            permanent=False,
            retry_after=retry_after_seconds(response),
        )
    return None
