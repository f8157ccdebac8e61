"""The web tier's client address, checked once granian's proxy wrapper has taken it from ``X-Forwarded-For``.

The wrapper (``backend/web.py``) copies whatever a trusted proxy names into ``REMOTE_ADDR``, an
address or not, and django-axes stores it in an ``inet`` column at a failed login: "garbage"
was a 500. nginx always names an address; anything else from a trusted proxy is a 400.
"""

import ipaddress
import json
from collections.abc import Callable, Iterable


class ClientAddressCheck:
    """Wrap a WSGI application: 400 when ``REMOTE_ADDR`` is not an IP address."""

    def __init__(self, app: Callable):
        self.app = app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        try:
            ipaddress.ip_address(environ.get("REMOTE_ADDR", ""))
        except ValueError:
            body = json.dumps({"error": "bad_request", "message": "X-Forwarded-For names no IP address."}).encode()
            headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            start_response("400 Bad Request", headers)
            return [body]
        return self.app(environ, start_response)
