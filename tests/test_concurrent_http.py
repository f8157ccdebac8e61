"""A batch's provider calls on libcurl's multi interface (providers/concurrent_http.py), over real local HTTP(S).

The rules of the one-call path hold here too: answers in order whatever finishes first, redirects
not followed, timeouts and transport failures as transient errors, http(s) only, no proxy from the
environment, TLS checked against the trust store.
"""

import socket
import time

import pytest

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


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:70/x", "dict://127.0.0.1:11211/stat"])
def test_only_http_and_https_are_spoken(transport, url):
    (outcome,) = transport().post_all([http.form_request(url, {}, timeout=2)])

    assert outcome.answer is None
    assert str(outcome.error).startswith("connection failed: curl 1 (")  # CURLE_UNSUPPORTED_PROTOCOL


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
