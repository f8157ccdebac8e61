"""A batch worker's provider calls, all at once, on libcurl's multi interface (pycurl) and kept-alive connections.

``Transport.post_all`` sends a wave's ``http.Request``s concurrently from the calling thread and
returns when every one has answered, failed or timed out. libcurl does the HTTP in C: 36 µs of the
worker's CPU a call against aiohttp's 104–116 µs, to the same stub at 200 calls in flight (README
"Benchmarks"), and a call is most of what a delivery costs the worker.

The same rules as ``http.post()``, the one-call path: redirects are not followed (a 3xx comes back as
an answer), a timeout or a transport failure is a transient ``ProviderError``, only http and https
are spoken, no proxy is taken from the environment (as the aiohttp session before it), and TLS is
verified against Python's default trust store (``SSL_CERT_FILE``, ``SSL_CERT_DIR``), else certifi's.
Only operator-configured URLs come here: user URLs (Web Push) go through ``http.post_public()``.
"""

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


@dataclass
class Outcome:
    """What became of one call: its ``answer`` or its transient ``error``, after ``seconds`` of wall time."""

    answer: Answer | None = None
    error: ProviderError | None = None
    seconds: float = 0.0


class Transport:
    """One thread's libcurl multi handle: at most ``connections`` sockets, kept open between waves.

    Not thread-safe: each batch worker thread owns one (``batch.Caller``).
    """

    def __init__(self, connections: int):
        self.connections = connections
        self._multi = pycurl.CurlMulti()
        self._multi.setopt(pycurl.M_MAX_TOTAL_CONNECTIONS, connections)
        self._multi.setopt(pycurl.M_MAXCONNECTS, connections)
        self._idle: list[pycurl.Curl] = []
        self._trust = _trust_store()

    def post_all(self, requests: list[Request]) -> list[Outcome]:
        """POST every request concurrently; their outcomes in the same order. Raises nothing a call causes."""
        outcomes = [Outcome() for _ in requests]
        running: dict[pycurl.Curl, tuple[int, BytesIO, list[bytes], float]] = {}
        try:
            for index, request in enumerate(requests):
                handle = self._idle.pop() if self._idle else self._handle()
                body, headers = BytesIO(), []
                _prepare(handle, request, body, headers)
                running[handle] = (index, body, headers, time.monotonic())
                self._multi.add_handle(handle)
            while running:
                self._perform()
                self._collect(requests, outcomes, running)
                if running:
                    wait = self._multi.timeout()
                    self._multi.select(1.0 if wait < 0 else max(wait, 1) / 1000)
        finally:
            for handle in running:
                self._multi.remove_handle(handle)
                self._idle.append(handle)
        return outcomes

    def _perform(self) -> None:
        while self._multi.perform()[0] == pycurl.E_CALL_MULTI_PERFORM:
            pass

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
