"""ASGI middleware: an HTTP request body larger than ``MAX_REQUEST_BODY`` bytes gets 413, before Django reads it.

A declared ``Content-Length`` above the cap is refused without reading the body at all; a body
without one (chunked) is counted as it is received and refused once it passes the cap, so Django
never copies more than the cap into its request file.

This does not save daphne's memory: daphne (Twisted) receives the whole body, spooling it to a
temporary file, and queues it to the application before calling it. The guard for that is nginx in
front (``client_max_body_size``, deploy/nginx.conf); this one keeps the application's own limit
when daphne is reached directly (the embedded demo) and answers JSON the API's callers can read.

``per_path`` raises the cap for exact paths only (the segment CSV upload: 20 MB and room for the
multipart framing); every other path keeps ``limit``.
"""

import json
from collections.abc import Awaitable, Callable

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class BodyTooLarge(Exception):
    """A streamed body passed the cap while the application was reading it."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


async def _refuse(send: Send, limit: int) -> None:
    body = json.dumps(
        {"error": "body_too_large", "message": f"The request body may be at most {limit} bytes."}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """Wrap an ASGI application; ``limit`` in bytes, ``per_path`` maps exact paths to their own cap."""

    def __init__(self, app: Callable, limit: int, per_path: dict[str, int] | None = None):
        self.app = app
        self.limit = limit
        self.per_path = dict(per_path or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.per_path.get(scope.get("path", ""), self.limit)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            return await _refuse(send, limit)
        received = 0

        async def counted() -> dict:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > limit:
                raise BodyTooLarge
            return message

        started = False

        async def watched(message: dict) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if not started:
                await _refuse(send, limit)
