"""The HTTP web tier's application: Django under WSGI, served by granian's worker processes (deploy/Procfile ``web``).

Why WSGI and not ASGI for HTTP: every view of this project is synchronous, and Django under ASGI
runs each sync view and sync middleware in a thread it hops to and from for every request. That
hop cost about 1.6 ms of CPU per request on this machine (``GET /healthz``: 2.0 ms of CPU per
request under uvicorn, 0.4 ms under granian's WSGI; README "Throughput: the send API"). daphne
keeps serving the inbox's WebSockets from ``backend/asgi.py`` (the Procfile's ``ws``).

What uvicorn did around the ASGI application is done here around the WSGI one: the client's
address from ``X-Forwarded-For`` when the request comes from a proxy in ``FORWARDED_ALLOW_IPS``
(uvicorn's variable and default, 127.0.0.1: the nginx beside it), the 413 for oversized bodies
(``body_limit.WSGIBodyLimit``), and static files where no nginx serves them (``SERVE_STATIC``).
"""

import gc
import os

from django.core.wsgi import get_wsgi_application

from backend.env import exit_on_configuration_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
with exit_on_configuration_error():
    django_wsgi_app = get_wsgi_application()

# Imported after the set-up above: they need the app registry.
from django.conf import settings
from granian.utils.proxies import wrap_wsgi_with_proxy_headers

from backend.body_limit import WSGIBodyLimit, upload_limits
from backend.client_address import ClientAddressCheck
from backend.static_files import WSGIStaticFiles

# The proxies whose X-Forwarded-For names the client: uvicorn's variable, so one setting serves both.
FORWARDED_ALLOW_IPS = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

http_app = WSGIStaticFiles(django_wsgi_app) if settings.SERVE_STATIC else django_wsgi_app
http_app = WSGIBodyLimit(http_app, settings.MAX_REQUEST_BODY, upload_limits())
# Inside the proxy wrapper: what a trusted proxy named must be an address (client_address.py).
application = wrap_wsgi_with_proxy_headers(ClientAddressCheck(http_app), FORWARDED_ALLOW_IPS)
# What is loaded by now lives as long as the worker: frozen out of the cyclic collector's reach, so that
# its full collections stop walking Django's ~180,000 objects again and again (as in backend/asgi.py).
gc.freeze()
