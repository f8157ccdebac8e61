"""A blocking WebSocket client of the inbox protocol, for tests and scripts (needs ``websockets``)."""

import json
from contextlib import ExitStack
from urllib.parse import quote, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect


def socket_url(base_url: str, token: str) -> str:
    """``http://host:port`` → ``ws://host:port/ws/inbox/?token=…``."""
    parts = urlsplit(base_url)
    scheme = "wss" if parts.scheme == "https" else "ws"
    return f"{scheme}://{parts.netloc}/ws/inbox/?token={quote(token)}"


class InboxSocket:
    """One open inbox socket. ``recv`` returns decoded messages; ``closed_with`` the close code.

    Sends ``Origin`` as a browser on the same site would: daphne's
    ``AllowedHostsOriginValidator`` refuses sockets without one.
    """

    def __init__(self, base_url: str, token: str, timeout: float = 10.0):
        self.timeout = timeout
        self._stack = ExitStack()
        self.connection: ClientConnection = self._stack.enter_context(
            connect(socket_url(base_url, token), origin=base_url, open_timeout=timeout, close_timeout=2)
        )

    def send(self, command: dict) -> None:
        self.connection.send(json.dumps(command))

    def recv(self, timeout: float | None = None) -> dict:
        return json.loads(self.connection.recv(timeout=self.timeout if timeout is None else timeout))

    def recv_until(self, type_: str, timeout: float | None = None) -> tuple[dict, list[dict]]:
        """The next message of ``type_``, and every message received before it."""
        before = []
        while True:
            message = self.recv(timeout)
            if message["type"] == type_:
                return message, before
            before.append(message)

    def quiet(self, seconds: float) -> list[dict]:
        """Every message that arrives within ``seconds`` (expect [] to prove silence)."""
        received = []
        try:
            while True:
                received.append(self.recv(seconds))
        except TimeoutError:
            return received

    def closed_with(self, timeout: float | None = None) -> tuple[int, list[dict]]:
        """Wait for the server to close; returns (close code, messages received before)."""
        received = []
        try:
            while True:
                received.append(self.recv(timeout))
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else 1006, received

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> "InboxSocket":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
