"""The web tier's client address, checked once granian's proxy wrapper has taken it from ``X-Forwarded-For``.

The wrapper (``backend/web.py``) copies whatever a trusted proxy names into ``REMOTE_ADDR``, an
address or not, and django-axes stores it in an ``inet`` column at a failed login: "garbage"
was a 500. nginx always names an address; anything else from a trusted proxy is a 400.
"""

import ipaddress
from collections.abc import Callable, Iterable

from backend.body_limit import error_body, refuse_wsgi

_NOT_AN_ADDRESS = error_body("bad_request", "X-Forwarded-For names no IP address.")


class ClientAddressCheck:
    """Wrap a WSGI application: 400 when ``REMOTE_ADDR`` is not an IP address."""

    def __init__(self, app: Callable):
        self.app = app

    def __call__(self, environ: dict, start_response: Callable) -> Iterable[bytes]:
        try:
            ipaddress.ip_address(environ.get("REMOTE_ADDR", ""))
        except ValueError:
            return refuse_wsgi(start_response, "400 Bad Request", _NOT_AN_ADDRESS)
        return self.app(environ, start_response)
