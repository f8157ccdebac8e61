"""Request bodies above NOTIFY_MAX_REQUEST_BODY get 413 before Django reads them (backend/body_limit.py)."""

import asyncio
import socket
from urllib.parse import urlsplit

import pytest

from backend.body_limit import BodyLimit
from tests.processes import Processes, worker_env

LIMIT = 1024


async def echo_length(scope, receive, send):
    """A stand-in application that reads the whole body, as Django does."""
    size, more = 0, True
    while more:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(size).encode()})


def call(headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[list[dict], int]:
    """Run the middleware once; returns what it sent and how many body messages were read."""
    queue = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent, read = [], 0

    async def receive():
        nonlocal read
        read += 1
        return queue.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/notifications", "headers": headers}
    asyncio.run(BodyLimit(echo_length, LIMIT)(scope, receive, send))
    return sent, read


def test_a_declared_length_over_the_limit_is_refused_without_reading_the_body():
    sent, read = call([(b"content-length", b"314572800")], [b"x" * 10])
    assert read == 0
    assert sent[0]["status"] == 413
    assert sent[1]["body"] == b'{"error": "body_too_large", "message": "The request body may be at most 1024 bytes."}'


def test_a_streamed_body_is_counted_and_refused_once_past_the_limit():
    sent, read = call([(b"transfer-encoding", b"chunked")], [b"x" * 600, b"x" * 600, b"x" * 600])
    assert read == 2
    assert [m.get("status") for m in sent if m["type"] == "http.response.start"] == [413]


def test_a_body_within_the_limit_reaches_the_application():
    sent, _ = call([(b"content-length", b"1024")], [b"x" * 512, b"x" * 512])
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b"1024"


@pytest.fixture
def processes(smtp_sink):
    procs = Processes(worker_env(smtp_sink.port))
    yield procs
    procs.stop_all()


def raw_post(url: str, head: str, body: bytes) -> bytes:
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        return sock.recv(65536)


@pytest.mark.django_db(transaction=True)
def test_a_real_daphne_answers_413_json_for_a_body_over_the_default_limit(processes):
    url = processes.start_web()
    body = b'{"user_id": "' + b"x" * (1024 * 1024) + b'"}'
    head = (
        "POST /api/v1/notifications HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Idempotency-Key: big-1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    answer = raw_post(url, head, body)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert answer.endswith(b'{"error": "body_too_large", "message": "The request body may be at most 1048576 bytes."}')
