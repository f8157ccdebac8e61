"""ASGI and WSGI middleware: a request body larger than ``MAX_REQUEST_BODY`` bytes gets 413 before Django reads it.

A declared ``Content-Length`` above the cap is refused without reading the body at all; a body
without one (chunked) is counted as it is received and refused once it passes the cap, so Django
never copies more than the cap into its request file.

This does not save daphne's memory: daphne (Twisted) receives the whole body, spooling it to a
temporary file, and queues it to the application before calling it. The guard for that is nginx in
front (``client_max_body_size``, deploy/nginx.conf); this one keeps the application's own limit
when daphne is reached directly (the embedded demo) and answers JSON the API's callers can read.

``per_path`` raises the cap for exact paths only (the segment CSV upload: 20 MB and room for the
multipart framing); every other path keeps ``limit``.

``BodyLimit`` wraps the ASGI application (daphne: /ws/ and the embedded demo), ``WSGIBodyLimit`` the
WSGI one (the web tier's HTTP, ``backend/web.py``).
"""

import io
import json
from collections.abc import Awaitable, Callable, Iterable

Scope = dict
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

_TOO_LARGE = "413 Request Entity Too Large"


class BodyTooLarge(Exception):
    """A streamed body passed the cap while the application was reading it."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def _refusal(limit: int) -> bytes:
    return error_body("body_too_large", f"The request body may be at most {limit} bytes.")


def error_body(error: str, message: str) -> bytes:
    """The API's JSON error body, ``{"error": code, "message": what a person reads}``, for an answer made here."""
    return json.dumps({"error": error, "message": message}).encode()


def refuse_wsgi(start_response: Callable, status: str, body: bytes) -> list[bytes]:
    """Answer a WSGI request with ``status`` (``"413 Request Entity Too Large"``) and the JSON ``body``."""
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


async def _refuse(send: Send, limit: int) -> None:
    body = _refusal(limit)
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


class WSGIBodyLimit:
    """``BodyLimit`` for a WSGI application (the web tier's, ``backend/web.py``): the same caps and 413 answer.

    A declared ``Content-Length`` above the cap is refused without reading the body. A chunked body
    (no ``Content-Length``) is read here up to one byte past the cap: refused when it passes it,
    else handed on whole with its length declared, since Django reads no body without one.
    """

    def __init__(self, app: Callable, limit: int, per_path: dict[str, int] | None = None):
        self.app = app
        self.limit = limit
        self.per_path = dict(per_path or {})

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        limit = self.per_path.get(environ.get("PATH_INFO", ""), self.limit)
        declared = environ.get("CONTENT_LENGTH") or ""
        if declared.isdigit():
            if int(declared) > limit:
                return refuse_wsgi(start_response, _TOO_LARGE, _refusal(limit))
        elif environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked":
            body = environ["wsgi.input"].read(limit + 1)
            if len(body) > limit:
                return refuse_wsgi(start_response, _TOO_LARGE, _refusal(limit))
            environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
        return self.app(environ, start_response)


def upload_limits() -> dict[str, int]:
    """The paths with caps of their own: the segment CSV upload takes up to ``SEGMENT_UPLOAD_MAX_BODY``
    (nginx has a matching location); the delivery-receipt webhooks, open to anyone who can reach
    them, take far less (receipts/views.py). Needs the URLconf loaded.
    """
    from django.conf import settings
    from django.urls import reverse

    return {
        reverse("frontend:segment-upload"): settings.SEGMENT_UPLOAD_MAX_BODY,
        reverse("receipts:twilio"): settings.NOTIFY["WEBHOOK_MAX_BODY"],
        reverse("receipts:vonage"): settings.NOTIFY["WEBHOOK_MAX_BODY"],
    }
