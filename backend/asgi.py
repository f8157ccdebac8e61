"""ASGI entry point, served by daphne: WebSockets by Channels (the inbox), and HTTP for the embedded demo.

Production's HTTP web tier serves the WSGI application of ``backend/web.py`` instead (README "Throughput").
"""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from backend.body_limit import BodyLimit, upload_limits  # noqa: E402
from backend.static_files import ASGIStaticFiles as StaticFiles  # noqa: E402
from inbox.routing import websocket_urlpatterns  # noqa: E402

# nginx serves /static/ in production; the embedded demo has no nginx.
http_app = StaticFiles(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app
# Oversized bodies get 413 before Django copies them (backend/body_limit.py), with caps of their own
# for the segment CSV upload and the delivery-receipt webhooks.
http_app = BodyLimit(http_app, settings.MAX_REQUEST_BODY, upload_limits())

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
# What is loaded by now lives as long as the process: frozen out of the cyclic collector's reach, so
# that its full collections stop walking Django's ~180,000 objects again and again (70 of the 400 ms
# of CPU a batch send of 1,000 took; README "Throughput: the send API").
gc.freeze()
