"""An SMTP server that keeps every message it accepts as an ``.eml`` file.

Built on aiosmtpd. Files are written to a temporary name and renamed, so a
reader polling the folder never sees half a message. Per-recipient rules
make it answer like a real relay in trouble: a reply code for RCPT TO (e.g.
``451`` transient, ``550`` permanent, RFC 5321 §4.2.1) or a delay before it
answers RCPT TO (a slow relay, or a worker to kill mid-send).
"""

import asyncio
import socket
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from aiosmtpd.controller import Controller


@dataclass
class SinkRules:
    """Per-address behaviour: ``replies`` maps an address to an SMTP reply line, ``delays`` to seconds.

    ``delays`` keys may also be a domain (``@never-answers.invalid``): every address there waits that long.
    """

    replies: dict[str, str] = field(default_factory=dict)
    delays: dict[str, float] = field(default_factory=dict)

    def delay_for(self, address: str) -> float:
        domain = "@" + address.rpartition("@")[2].lower()
        return self.delays.get(address) or self.delays.get(domain) or 0.0


class MaildirHandler:
    """aiosmtpd handler writing ``<folder>/<ns-timestamp>-<uuid>.eml`` for each accepted message."""

    def __init__(self, folder: Path | str, rules: SinkRules | None = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.rules = rules or SinkRules()

    async def handle_RCPT(self, server, session, envelope, address: str, rcpt_options) -> str:
        delay = self.rules.delay_for(address)
        if delay:
            await asyncio.sleep(delay)
        reply = self.rules.replies.get(address)
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

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


def start_sink(
    folder: Path | str, host: str = "127.0.0.1", port: int | None = None, rules: SinkRules | None = None
) -> Controller:
    """Start a sink in a background thread and return its controller (``.port``, ``.handler``, ``.stop()``).

    The port is bound by us first: aiosmtpd's ``Controller(port=0)`` fails
    its own readiness probe.
    """
    controller = Controller(MaildirHandler(folder, rules), hostname=host, port=port or free_port(host))
    controller.start()
    return controller
