"""ASGI entry point, served by daphne: WebSockets by Channels (the inbox), and HTTP for the embedded demo.

Production's HTTP web tier serves the WSGI application of ``backend/web.py`` instead (README "Throughput").
"""

import gc
import os

from django.core.asgi import get_asgi_application

from backend.env import exit_on_configuration_error

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
with exit_on_configuration_error():
    django_asgi_app = get_asgi_application()

# Imported after the set-up above: they need the app registry.
from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings

from backend.body_limit import BodyLimit, upload_limits
from backend.static_files import ASGIStaticFiles as StaticFiles
from inbox.routing import websocket_urlpatterns

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
