"""An SMTP server that keeps every message it accepts as an ``.eml`` file.

Built on aiosmtpd. Files are written to a temporary name and renamed, so a
reader polling the folder never sees half a message.
"""

import socket
import time
import uuid
from pathlib import Path

from aiosmtpd.controller import Controller


class MaildirHandler:
    """aiosmtpd handler writing ``<folder>/<ns-timestamp>-<uuid>.eml`` for each message."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    async def handle_DATA(self, server, session, envelope) -> str:
        name = f"{time.time_ns()}-{uuid.uuid4().hex}.eml"
        tmp = self.folder / f".{name}.tmp"
        tmp.write_bytes(envelope.original_content or envelope.content)
        tmp.rename(self.folder / name)
        return "250 Message accepted for delivery"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on ``host``."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def start_sink(folder: Path, host: str = "127.0.0.1", port: int | None = None) -> Controller:
    """Start a sink in a background thread and return its controller (``.port``, ``.stop()``).

    The port is bound by us first: aiosmtpd's ``Controller(port=0)`` fails
    its own readiness probe.
    """
    controller = Controller(MaildirHandler(folder), hostname=host, port=port or free_port(host))
    controller.start()
    return controller
