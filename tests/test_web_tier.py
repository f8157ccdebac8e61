"""The HTTP web tier: Django under WSGI (backend/web.py), run by deploy/Procfile's ``web`` line (granian)."""

import io
import json

import pytest
import requests
from granian.utils.proxies import wrap_wsgi_with_proxy_headers

from backend.body_limit import WSGIBodyLimit
from backend.client_address import ClientAddressCheck
from backend.notifications.models import Notification
from inbox.consumers import MAX_FRAME_CHARS
from tests.processes import ROOT, Processes, worker_env

LIMIT = 1024


def echo(environ, start_response):
    """A stand-in application: the body Django would read (CONTENT_LENGTH bytes) and the client address."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = json.dumps({"read": len(environ["wsgi.input"].read(length)), "client": environ.get("REMOTE_ADDR")})
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body.encode()]


def call(app, environ: dict) -> tuple[str, dict]:
    answer = {}
    base = {"REMOTE_ADDR": "127.0.0.1", "PATH_INFO": "/api/v1/notifications", "wsgi.input": io.BytesIO()}
    body = b"".join(app({**base, **environ},
                        lambda status, headers: answer.update(status=status)))  # fmt: skip
    return answer["status"], json.loads(body)


class Unreadable(io.BytesIO):
    def read(self, *args):
        raise AssertionError("the body was read")


def test_a_declared_length_over_the_limit_is_a_413_without_reading_the_body():
    status, body = call(WSGIBodyLimit(echo, LIMIT), {"CONTENT_LENGTH": "314572800", "wsgi.input": Unreadable()})
    assert status == "413 Request Entity Too Large"
    assert body == {"error": "body_too_large", "message": "The request body may be at most 1024 bytes."}


def test_a_chunked_body_over_the_limit_is_a_413():
    chunked = {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"x" * 1500)}
    assert call(WSGIBodyLimit(echo, LIMIT), chunked)[0] == "413 Request Entity Too Large"


def test_a_chunked_body_within_the_limit_reaches_the_application_whole():
    """Django reads no body without a Content-Length: the chunked body arrives with its length declared."""
    chunked = {"HTTP_TRANSFER_ENCODING": "chunked", "wsgi.input": io.BytesIO(b"x" * 1000)}
    assert call(WSGIBodyLimit(echo, LIMIT), chunked) == ("200 OK", {"read": 1000, "client": "127.0.0.1"})


def test_a_path_with_its_own_cap_takes_more():
    app = WSGIBodyLimit(echo, LIMIT, {"/upload": 4096})
    environ = {"PATH_INFO": "/upload", "CONTENT_LENGTH": "3000", "wsgi.input": io.BytesIO(b"x" * 3000)}
    assert call(app, environ)[1]["read"] == 3000


def test_x_forwarded_for_names_the_client_only_from_a_trusted_proxy():
    app = wrap_wsgi_with_proxy_headers(echo, "127.0.0.1")
    forwarded = {"HTTP_X_FORWARDED_FOR": "203.0.113.7"}
    assert call(app, forwarded)[1]["client"] == "203.0.113.7"
    assert call(app, {**forwarded, "REMOTE_ADDR": "10.0.0.9"})[1]["client"] == "10.0.0.9"


@pytest.fixture
def web(smtp_sink):
    processes = Processes(worker_env(smtp_sink.port))
    yield processes.start_procfile_web()
    processes.stop_all()


@pytest.mark.django_db(transaction=True)
def test_the_procfile_web_tier_accepts_a_send_and_refuses_what_uvicorn_refused(demo_data, orders_service, web):
    headers = {"Authorization": f"Bearer {orders_service[1]}", "Content-Type": "application/json"}
    body = json.dumps({"user_id": "u-en-1", "kind": "shipped", "params": {"order": "5012"}}).encode()

    def chunks():
        yield body[:10]
        yield body[10:]

    sent = requests.post(f"{web}/api/v1/notifications", data=chunks(), headers={**headers, "Idempotency-Key": "w-1"})
    assert sent.status_code == 202
    assert Notification.objects.get(pk=sent.json()["id"]).params == {"order": "5012"}
    again = requests.post(f"{web}/api/v1/notifications", data=body, headers={**headers, "Idempotency-Key": "w-1"})
    assert (again.status_code, again.json()["id"]) == (200, sent.json()["id"])
    big = requests.post(f"{web}/api/v1/notifications", data=b"x" * (1024 * 1024 + 1), headers=headers)
    assert big.status_code == 413
    assert big.json() == {"error": "body_too_large", "message": "The request body may be at most 1048576 bytes."}
    unknown = requests.get(f"{web}/api/v1/nothing-here", headers=headers)
    assert (unknown.status_code, unknown.json()["error"]) == (404, "not_found")
    nameless = requests.get(f"{web}/healthz", headers={"X-Forwarded-For": "garbage"})  # from 127.0.0.1: trusted
    assert (nameless.status_code, nameless.json()["error"]) == (400, "bad_request")


def test_nginx_hands_the_web_tier_only_whole_bodies():
    """granian has no timeout on a request body (emmett-framework/granian#728, wontfix), and a WSGI worker reads it
    in its one blocking thread: 8 connections each sending 10 bytes of a 200-byte body held all 8 workers for
    over 200 s (2026-12-01). nginx's buffering is the only guard: it must stay on, with a body timeout.
    """
    conf = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "proxy_request_buffering off" not in conf
    assert "client_body_timeout 30s;" in conf


def test_a_forwarded_address_that_is_no_address_is_a_400_not_a_500():
    """django-axes stores the client address in an inet column: "garbage" from a trusted proxy was a 500 at login."""
    app = wrap_wsgi_with_proxy_headers(ClientAddressCheck(echo), "127.0.0.1")

    for forwarded in ("garbage", "203.0.113.7, unknown"):
        status, body = call(app, {"HTTP_X_FORWARDED_FOR": forwarded})
        assert status == "400 Bad Request"
        assert body == {"error": "bad_request", "message": "X-Forwarded-For names no IP address."}
    assert call(app, {"HTTP_X_FORWARDED_FOR": "2001:db8::7"})[1]["client"] == "2001:db8::7"
    # From an untrusted peer the header is ignored, whatever it holds.
    assert call(app, {"HTTP_X_FORWARDED_FOR": "garbage", "REMOTE_ADDR": "10.0.0.9"})[1]["client"] == "10.0.0.9"


def test_every_daphne_that_serves_sockets_caps_a_frame_at_16_kib():
    """daphne queues each frame before the consumer's command budget sees it: 1 MiB frames from a few people's
    sockets took it from 470 to 900 MB while the database thread was busy (2026-12-02)."""
    sources = {
        "deploy/Procfile": "ws: daphne",
        "deploy/docker-compose.yml": "exec daphne",
        "deploy/README.md": "/bin/daphne",
        "bin/demo": "web: daphne",
    }
    for path, marker in sources.items():
        [line] = [line for line in (ROOT / path).read_text().splitlines() if marker in line]
        assert "--websocket-max-message-size 16384 --websocket-max-frame-size 16384" in line, path
    assert 4 * MAX_FRAME_CHARS <= 16384  # a command of at most 4,096 characters fits in UTF-8
