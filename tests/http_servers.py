"""Local HTTP(S) servers that record what they are sent, for the tests of outbound HTTP."""

import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import trustme


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # a wave's connections open at once; the default 5 would drop their SYNs
    daemon_threads = True


class Recorder:
    """A local HTTP(S) server on a free port that keeps every request and answers with ``answer``."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], tuple[int, dict]], tls: ssl.SSLContext | None = None):
        self.requests: list[dict] = []
        self.sni: list[str | None] = []
        self.headers: list[dict[str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                recorder.requests.append(
                    {"path": self.path, "host": self.headers["Host"], "body": self.rfile.read(length)}
                )
                recorder.headers.append(dict(self.headers))
                status, headers = answer(self)
                self.send_response(status)
                for name, value in {**headers, "Content-Length": "0"}.items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            tls.sni_callback = lambda sock, name, context: self.sni.append(name)
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def servers():
    """Start ``Recorder``s; all are stopped after the test."""
    started: list[Recorder] = []

    def start(answer=lambda handler: (201, {}), tls=None) -> Recorder:
        started.append(Recorder(answer, tls))
        return started[-1]

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def tls_authority() -> trustme.CA:
    """A throwaway certificate authority; the client trusts it through ``verify=<its bundle>``."""
    return trustme.CA()


def tls_server_context(authority, name: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(name).configure_cert(context)
    return context


def answering_server(answers: list[tuple[int, bytes]], content_type: str = "application/json") -> str:
    """A local server answering one call per entry of ``answers`` (status, body of ``content_type``), in order.

    Raw bytes on a socket, so a body may hold what an HTTP library would not write (a NUL byte); its URL.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(len(answers))

    def answer():
        for status, body in answers:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                head = f"HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: {content_type}\r\n".encode()
                conn.sendall(head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        listener.close()

    threading.Thread(target=answer, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}"
