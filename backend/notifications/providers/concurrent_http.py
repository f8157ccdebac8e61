"""A batch worker's provider calls, all at once, on libcurl's multi interface (pycurl) and kept-alive connections.

``Transport.post_all`` sends a wave's ``http.Request``s concurrently from the calling thread and
returns when every one has answered, failed or timed out. libcurl does the HTTP in C: 36 µs of the
worker's CPU a call against aiohttp's 104–116 µs, to the same stub at 200 calls in flight (README
"Benchmarks"), and the call was a third of what a delivery cost the worker.

The same rules as ``http.post()``, the one-call path: redirects are not followed (a 3xx comes back as
an answer), a timeout or a transport failure is a transient ``ProviderError``, only http and https
are spoken (a URL without a scheme is refused, never sent as http), HTTP/1.1, no proxy is taken from
the environment (as the aiohttp session before it), and TLS is verified against Python's default
trust store (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), else certifi's. An answer over
``MAX_ANSWER_BYTES`` is cut off and counts as a transport failure.
Only operator-configured URLs come here: user URLs (Web Push) go through ``http.post_public()``.
"""

import re
import selectors
import ssl
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from io import BytesIO

import certifi
import pycurl
from requests.structures import CaseInsensitiveDict

from backend.notifications.providers.base import ProviderError
from backend.notifications.providers.http import Answer, Request

_USER_AGENT = "notify/1.0"
# The schemes libcurl may speak here, whatever their case; it would guess one for a URL without.
_HTTP_URL = re.compile(r"https?://", re.IGNORECASE)
# Bytes of an answer kept at most: an adapter reads a reference or an error from a few hundred.
MAX_ANSWER_BYTES = 1 << 20


@dataclass
class Outcome:
    """What became of one call: its ``answer`` or its transient ``error``, after ``seconds`` of wall time."""

    answer: Answer | None = None
    error: ProviderError | None = None
    seconds: float = 0.0


class Transport:
    """One thread's libcurl multi handle: at most ``connections`` sockets, kept open between waves.

    libcurl says which sockets to wait on (``M_SOCKETFUNCTION``) and an epoll selector waits on them:
    ``select()``, which ``CurlMulti.select`` uses, sees no descriptor numbered 1,024 or more (FD_SETSIZE),
    and a worker with several batch threads of 100 connections each gets there; answers on those
    sockets were then never read, and calls the provider had taken ended as timeouts and were sent again.
    Not thread-safe: each batch worker thread owns one (``batch.Caller``).
    """

    def __init__(self, connections: int):
        self.connections = connections
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, connections)
        self._multi.setopt(pycurl.M_MAXCONNECTS, connections)
        self._selector = selectors.DefaultSelector()
        self._multi.setopt(pycurl.M_SOCKETFUNCTION, self._watch)
        self._idle: list[pycurl.Curl] = []
        self._trust = _trust_store()

    def post_all(self, requests: list[Request]) -> list[Outcome]:
        """POST every request concurrently; their outcomes in the same order. Raises nothing a call causes.

        A request libcurl cannot take (no http(s) scheme, a character a URL or header cannot hold) is
        its own transient error, as ``requests`` refuses it on the single path; the others still go.
        """
        outcomes = [Outcome() for _ in requests]
        running: dict[pycurl.Curl, tuple[int, BytesIO, list[bytes], float]] = {}
        try:
            for index, request in enumerate(requests):
                if not _HTTP_URL.match(request.url):
                    # libcurl would guess http:// for "api.twilio.com/…" and send the credentials in clear.
                    outcomes[index] = Outcome(error=_unsendable(request, "not an http(s) URL"))
                    continue
                handle = self._idle.pop() if self._idle else self._handle()
                body, headers = BytesIO(), []
                try:
                    _prepare(handle, request, body, headers)
                except (pycurl.error, UnicodeError, TypeError, ValueError) as exc:
                    self._idle.append(handle)
                    outcomes[index] = Outcome(error=_unsendable(request, exc.__class__.__name__))
                    continue
                running[handle] = (index, body, headers, time.monotonic())
                self._multi.add_handle(handle)
            self._act(pycurl.SOCKET_TIMEOUT, 0)
            while True:
                self._collect(requests, outcomes, running)
                if not running:
                    break
                self._wait()
        finally:
            for handle in running:
                self._release(handle)
        return outcomes

    def _wait(self) -> None:
        """Wait for the sockets libcurl watches, at most until its next timeout, and let it act on what came."""
        wait = self._multi.timeout()  # ms; -1: none set
        deadline = time.monotonic() + (1.0 if wait < 0 else wait / 1000)
        for key, events in self._selector.select(max(0.0, deadline - time.monotonic())):
            flags = (pycurl.CSELECT_IN if events & selectors.EVENT_READ else 0) | (
                pycurl.CSELECT_OUT if events & selectors.EVENT_WRITE else 0
            )
            self._act(key.fd, flags)
        if time.monotonic() >= deadline:
            self._act(pycurl.SOCKET_TIMEOUT, 0)

    def _act(self, fd: int, flags: int) -> None:
        while self._multi.socket_action(fd, flags)[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass

    def _watch(self, what: int, fd: int, multi: pycurl.CurlMulti, data: object) -> None:
        """libcurl's ``M_SOCKETFUNCTION``: wait on ``fd`` for reading, writing or both, or no more (POLL_REMOVE)."""
        events = (selectors.EVENT_READ if what & pycurl.POLL_IN else 0) | (
            selectors.EVENT_WRITE if what & pycurl.POLL_OUT else 0
        )
        if fd in self._selector.get_map():
            self._selector.unregister(fd)
        if events and what != pycurl.POLL_REMOVE:
            self._selector.register(fd, events)

    def _collect(self, requests: list[Request], outcomes: list[Outcome], running: dict) -> None:
        """Move the finished transfers of ``running`` to their outcomes and their handles back to the idle list."""
        while True:
            queued, done, failed = self._multi.info_read()
            for handle in done:
                index, body, headers, started = running.pop(handle)
                answer = Answer(handle.getinfo(pycurl.RESPONSE_CODE), body.getvalue().decode(errors="replace"),
                                _Headers(headers))  # fmt: skip
                outcomes[index] = Outcome(answer=answer, seconds=time.monotonic() - started)
                self._release(handle)
            for handle, code, text in failed:
                index, _, _, started = running.pop(handle)
                request = requests[index]
                if code == pycurl.E_OPERATION_TIMEDOUT:
                    error = ProviderError(f"timed out after {request.timeout:g} s: {request.url}", permanent=False)
                else:
                    error = ProviderError(f"connection failed: curl {code} ({text}): {request.url}", permanent=False)
                outcomes[index] = Outcome(error=error, seconds=time.monotonic() - started)
                self._release(handle)
            if not queued:
                return

    def _release(self, handle: pycurl.Curl) -> None:
        self._multi.remove_handle(handle)
        self._idle.append(handle)

    def _handle(self) -> pycurl.Curl:
        """A new easy handle with the options every call shares."""
        handle = pycurl.Curl()
        handle.setopt(pycurl.NOSIGNAL, 1)  # a timeout must not raise SIGALRM in a worker thread
        handle.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        handle.setopt(pycurl.FOLLOWLOCATION, 0)
        handle.setopt(pycurl.PROXY, "")  # an empty proxy: none from http_proxy and its kind
        handle.setopt(pycurl.USERAGENT, _USER_AGENT)
        # HTTP/1.1 as requests and aiohttp speak it: libcurl would offer h2 over TLS and multiplex a wave on one
        # connection, a protocol no test or measurement here has covered.
        handle.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        # libcurl stops a transfer at this size, announced or not (curl 63): a provider's answer is a few hundred bytes.
        handle.setopt(pycurl.MAXFILESIZE_LARGE, MAX_ANSWER_BYTES)
        cafile, capath = self._trust
        if cafile:
            handle.setopt(pycurl.CAINFO, cafile)
        if capath:
            handle.setopt(pycurl.CAPATH, capath)
        return handle

    def close(self) -> None:
        """Close every connection and handle."""
        for handle in self._idle:
            handle.close()
        self._idle = []
        self._multi.close()
        self._selector.close()


def _unsendable(request: Request, reason: str) -> ProviderError:
    """The transient error of a request refused before it was sent, as ``requests`` refuses it on the single path."""
    return ProviderError(f"connection failed: {reason}: {request.url}", permanent=False)


def _prepare(handle: pycurl.Curl, request: Request, body: BytesIO, headers: list[bytes]) -> None:
    """Point a reused handle at ``request``; the answer's body goes to ``body``, its header lines to ``headers``."""
    handle.setopt(pycurl.URL, request.url)
    handle.setopt(pycurl.POSTFIELDS, request.body)
    # libcurl would add "Expect: 100-continue" to a body over 1 KiB and wait for the server's go-ahead.
    handle.setopt(pycurl.HTTPHEADER, [f"{name}: {value}" for name, value in request.headers.items()] + ["Expect:"])
    handle.setopt(pycurl.TIMEOUT_MS, max(1, round(request.timeout * 1000)))
    handle.setopt(pycurl.WRITEDATA, body)
    handle.setopt(pycurl.HEADERFUNCTION, headers.append)


class _Headers(Mapping[str, str]):
    """An answer's headers from its raw lines, parsed on first use: an adapter reads them only to retry."""

    def __init__(self, lines: list[bytes]):
        self._lines = lines
        self._parsed: CaseInsensitiveDict | None = None

    def _map(self) -> CaseInsensitiveDict:
        if self._parsed is None:
            self._parsed = CaseInsensitiveDict()
            for line in self._lines:  # the status line and the blank one have no colon
                name, colon, value = line.decode("iso-8859-1").partition(":")
                if colon:
                    self._parsed[name.strip()] = value.strip()
        return self._parsed

    def __getitem__(self, name: str) -> str:
        return self._map()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._map())

    def __len__(self) -> int:
        return len(self._map())


def _trust_store() -> tuple[str | None, str | None]:
    """The CA file and directory that Python's ``ssl`` trusts by default (``SSL_CERT_FILE``, ``SSL_CERT_DIR``).

    certifi's bundle when it trusts neither.
    """
    paths = ssl.get_default_verify_paths()
    cafile = paths.cafile if paths.cafile else None
    capath = paths.capath if paths.capath else None
    if cafile is None and capath is None:
        return certifi.where(), None
    return cafile, capath
