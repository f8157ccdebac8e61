"""A batch's provider calls on libcurl's multi interface (providers/concurrent_http.py), over real local HTTP(S).

The rules of the one-call path hold here too: answers in order whatever finishes first, redirects
not followed, timeouts and transport failures as transient errors, http(s) only, no proxy from the
environment, TLS checked against the trust store.
"""

import os
import resource
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from backend.notifications.delivery import batch
from backend.notifications.delivery.dispatch import Target
from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, provider_named
from backend.notifications.providers.concurrent_http import Transport
from tests.http_servers import tls_server_context


@pytest.fixture
def transport():
    made: list[Transport] = []

    def make(connections: int = 8) -> Transport:
        made.append(Transport(connections))
        return made[-1]

    yield make
    for each in made:
        each.close()


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_each_request_gets_its_own_outcome_in_the_order_asked(servers, transport):
    slow = servers(lambda handler: (time.sleep(0.3), (201, {}))[1])
    busy = servers(lambda handler: (429, {"Retry-After": "7"}))
    dead = closed_port()
    requests = [
        http.form_request(f"{slow.url}/sms", {"To": "+14155550123", "Body": "سلام 👋"}, timeout=5,
                          headers={"Authorization": http.basic_auth("AC1", "tök")}),
        http.json_request(f"{busy.url}/push", {"title": "Привет"}, timeout=5),
        http.form_request(f"http://127.0.0.1:{dead}/sms", {"To": "x"}, timeout=5),
    ]  # fmt: skip

    first, second, third = transport().post_all(requests)

    assert (first.answer.status_code, first.error) == (201, None)
    assert first.seconds >= 0.3
    assert slow.requests[0]["body"] == b"To=%2B14155550123&Body=%D8%B3%D9%84%D8%A7%D9%85+%F0%9F%91%8B"
    sent = slow.headers[0]
    assert (sent["Content-Type"], sent["Authorization"], sent["User-Agent"]) == (
        "application/x-www-form-urlencoded", "Basic QUMxOnTDtms=", "notify/1.0",
    )  # fmt: skip
    assert (second.answer.status_code, second.answer.headers["retry-after"]) == (429, "7")
    assert http.retry_after_seconds(second.answer) == 7.0
    assert busy.requests[0]["body"] == b'{"title": "\\u041f\\u0440\\u0438\\u0432\\u0435\\u0442"}'
    assert busy.headers[0]["Content-Type"] == "application/json"
    assert third.answer is None
    assert (third.error.permanent, str(third.error).startswith("connection failed: curl 7 (")) == (False, True)
    assert str(third.error).endswith(f": http://127.0.0.1:{dead}/sms")


def test_a_call_past_its_timeout_is_a_transient_error_and_the_others_still_answer(servers, transport):
    stuck = servers(lambda handler: (time.sleep(2), (201, {}))[1])
    quick = servers()
    started = time.monotonic()

    late, on_time = transport().post_all(
        [http.form_request(f"{stuck.url}/a", {}, timeout=0.4), http.form_request(f"{quick.url}/b", {}, timeout=5)]
    )

    assert time.monotonic() - started < 1.5
    assert late.answer is None
    assert (late.error.permanent, str(late.error)) == (False, f"timed out after 0.4 s: {stuck.url}/a")
    assert on_time.answer.status_code == 201


def test_a_redirect_comes_back_as_the_answer_and_is_not_followed(servers, transport):
    elsewhere = servers()
    redirecting = servers(lambda handler: (302, {"Location": f"{elsewhere.url}/stolen"}))

    (outcome,) = transport().post_all([http.form_request(f"{redirecting.url}/sms", {"To": "x"}, timeout=5)])

    assert (outcome.answer.status_code, outcome.answer.headers["Location"]) == (302, f"{elsewhere.url}/stolen")
    assert elsewhere.requests == []


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "FILE:///etc/passwd", "gopher://127.0.0.1:70/x", "dict://127.0.0.1:11211/stat",
     "ftp.example.test/x"],  # the last one libcurl would guess as ftp://
)  # fmt: skip
def test_only_http_and_https_are_spoken(transport, url):
    (outcome,) = transport().post_all([http.form_request(url, {}, timeout=2)])

    assert outcome.answer is None
    assert (outcome.error.permanent, str(outcome.error)) == (False, f"connection failed: not an http(s) URL: {url}")


def test_no_proxy_is_taken_from_the_environment(servers, transport, monkeypatch):
    server = servers()
    for name in ("http_proxy", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{closed_port()}")

    (outcome,) = transport().post_all([http.form_request(f"{server.url}/sms", {}, timeout=5)])

    assert outcome.answer.status_code == 201
    assert len(server.requests) == 1


def test_tls_is_checked_against_the_trust_store(servers, transport, tls_authority, tmp_path, monkeypatch):
    good = servers(tls=tls_server_context(tls_authority, "127.0.0.1"))
    wrong_name = servers(tls=tls_server_context(tls_authority, "other.test"))
    requests = [http.form_request(f"{server.url}/sms", {}, timeout=5) for server in (good, wrong_name)]
    untrusting = transport()
    bundle = tmp_path / "ca.pem"
    tls_authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))

    trusted, other = transport().post_all(requests)
    (unknown,) = untrusting.post_all(requests[:1])

    assert trusted.answer.status_code == 201
    assert other.answer is None and "curl 60 (" in str(other.error)  # CURLE_PEER_FAILED_VERIFICATION
    assert unknown.answer is None and "curl 60 (" in str(unknown.error)
    assert (len(good.requests), len(wrong_name.requests)) == (1, 0)


@pytest.mark.django_db
def test_an_adapter_request_read_from_the_stub_gives_the_reference_its_send_gives(stub_providers, transport):
    twilio = provider_named("twilio")
    message = OutboundMessage(notification_id="n-1", channel="sms", to="+14155550123", subject="", text="Hi")

    (outcome,) = transport().post_all([twilio.request(message)])
    reference = twilio.reference(outcome.answer)

    assert reference.startswith("SM")
    assert twilio.send(message).startswith("SM")
    received = stub_providers.state.messages
    assert [(m["provider"], m["to"], m["text"]) for m in received] == [("twilio", "+14155550123", "Hi")] * 2


def test_sockets_numbered_past_fd_setsize_are_waited_on(servers, transport):
    # A worker with several batch threads of 100 connections passes descriptor 1,024, which select() cannot watch:
    # the answers went unread and calls the provider had taken ended as timeouts, to be sent again.
    pool = transport(20)  # made first, as a batch thread makes its Caller
    server = servers(lambda handler: (time.sleep(0.05), (201, {}))[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    taken = []
    try:
        while not taken or taken[-1] < 1100:
            taken.append(os.open(os.devnull, os.O_RDONLY))
        started = time.monotonic()
        outcomes = pool.post_all([http.form_request(f"{server.url}/{n}", {}, timeout=3) for n in range(20)])
        seconds = time.monotonic() - started
    finally:
        for fd in taken:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    assert [outcome.error for outcome in outcomes] == [None] * 20
    assert [outcome.answer.status_code for outcome in outcomes] == [201] * 20
    assert seconds < 2


def test_a_url_without_a_scheme_is_refused_not_sent_as_http(servers, transport):
    server = servers()
    request = http.form_request(f"127.0.0.1:{server.port}/sms", {"Body": "code 493817"}, timeout=5,
                                headers={"Authorization": http.basic_auth("AC1", "secret")})  # fmt: skip

    (outcome,) = transport().post_all([request])

    assert (outcome.answer, outcome.error.permanent) == (None, False)
    assert str(outcome.error) == f"connection failed: not an http(s) URL: 127.0.0.1:{server.port}/sms"
    assert server.requests == []


def test_a_request_libcurl_cannot_take_fails_alone(servers, transport):
    server = servers()
    requests = [
        http.form_request(f"{server.url}/Accounts/ACé/Messages.json", {}, timeout=5),  # pycurl takes ASCII only
        http.form_request(f"{server.url}/sms", {}, timeout=5, headers={"X-Id": "دلیل"}),
        http.form_request(f"{server.url}/sms", {}, timeout=5),
    ]

    bad_url, bad_header, fine = transport().post_all(requests)

    assert str(bad_url.error) == f"connection failed: UnicodeEncodeError: {server.url}/Accounts/ACé/Messages.json"
    assert str(bad_header.error) == f"connection failed: UnicodeEncodeError: {server.url}/sms"
    assert (fine.error, fine.answer.status_code) == (None, 201)
    assert len(server.requests) == 1


def streaming_server(head: bytes, chunks: int) -> int:
    """A one-shot local server answering ``head`` then ``chunks`` MiB of body; its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def answer():
        connection, _ = listener.accept()
        connection.recv(65536)
        try:
            connection.sendall(head)
            for _ in range(chunks):
                connection.sendall(b"a" * (1 << 20))
        except OSError:
            pass
        connection.close()
        listener.close()

    threading.Thread(target=answer, daemon=True).start()
    return listener.getsockname()[1]


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (64 << 20),
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",  # no length: read until the server closes
    ],
    ids=["announced", "unannounced"],
)
def test_an_answer_past_a_mebibyte_is_cut_off(transport, head):
    port = streaming_server(head, chunks=64)

    (outcome,) = transport().post_all([http.form_request(f"http://127.0.0.1:{port}/sms", {}, timeout=10)])

    assert outcome.answer is None
    assert str(outcome.error).startswith("connection failed: curl 63 (")  # CURLE_FILESIZE_EXCEEDED


def test_https_speaks_http_1_1_even_where_the_server_offers_h2(transport, tls_authority, tmp_path, monkeypatch):
    bundle = tmp_path / "ca.pem"
    tls_authority.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    context = tls_server_context(tls_authority, "127.0.0.1")
    context.set_alpn_protocols(["h2", "http/1.1"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    chosen = []

    def handshake():
        connection, _ = listener.accept()
        with context.wrap_socket(connection, server_side=True) as tls:
            chosen.append(tls.selected_alpn_protocol())

    thread = threading.Thread(target=handshake, daemon=True)
    thread.start()
    transport().post_all([http.form_request(f"https://127.0.0.1:{listener.getsockname()[1]}/x", {}, timeout=3)])
    thread.join(3)
    listener.close()

    assert chosen == ["http/1.1"]


class OddProvider:
    """An HTTP adapter whose ``request`` or ``reference`` fails as ``mode`` says, quoting the OTP it carries."""

    name = "odd"

    def __init__(self, mode: str, url: str):
        self.mode, self.url = mode, url

    def request(self, message):
        if self.mode == "request":
            raise ValueError("no route for code 493817")
        return http.form_request(self.url, {"Body": "code 493817"}, timeout=5)

    def reference(self, answer):
        if self.mode == "reference":
            return answer.json()["sid"]  # the Recorder answers with an empty body
        return "ref-1"


def test_a_wave_keeps_going_when_an_adapter_raises_and_the_secret_is_masked(servers):
    server = servers()
    kind = SimpleNamespace(params={"code": {"secret": True}})
    items = [
        batch.Item(SimpleNamespace(pk=f"n{n}", kind=kind, params={"code": "493817"}), Target(OddProvider(mode, url)))
        for n, (mode, url) in enumerate([("request", server.url), ("reference", server.url), ("", server.url)])
    ]
    caller = batch.Caller(4)
    try:
        caller.call_all(items)
    finally:
        caller.close()

    unbuilt, unread, fine = items
    assert (unbuilt.error.permanent, str(unbuilt.error)) == (False, "odd raised ValueError: no route for code ••••••")
    assert (unread.error.permanent, str(unread.error).startswith("odd raised JSONDecodeError: ")) == (False, True)
    assert (fine.error, fine.reference) == (None, "ref-1")
    assert len(server.requests) == 2
