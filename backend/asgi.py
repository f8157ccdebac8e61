"""ASGI entry point, served by daphne: HTTP by Django, WebSockets by Channels (the inbox)."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.core.exceptions import SuspiciousFileOperation  # noqa: E402
from django.http import Http404  # noqa: E402
from django.urls import reverse  # noqa: E402

from backend.body_limit import BodyLimit  # noqa: E402
from inbox.routing import websocket_urlpatterns  # noqa: E402


class StaticFiles(ASGIStaticFilesHandler):
    """Django's static files handler, answering 404 for a path that leaves the static folders.

    Django's own lets the ``SuspiciousFileOperation`` of ``/static/%2e%2e/%2e%2e/etc/passwd`` escape as a 500.
    """

    def serve(self, request):
        try:
            return super().serve(request)
        except SuspiciousFileOperation as exc:
            raise Http404("No such static file.") from exc


# nginx serves /static/ in production; the embedded demo has no nginx.
http_app = StaticFiles(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app
# Oversized bodies get 413 before Django copies them (backend/body_limit.py). Exceptions: the
# segment CSV upload takes up to SEGMENT_UPLOAD_MAX_BODY (nginx has a matching location).
# The delivery-receipt webhooks, open to anyone who can reach them, take far less (receipts/views.py).
upload_limits = {
    reverse("frontend:segment-upload"): settings.SEGMENT_UPLOAD_MAX_BODY,
    reverse("receipts:twilio"): settings.NOTIFY["WEBHOOK_MAX_BODY"],
    reverse("receipts:vonage"): settings.NOTIFY["WEBHOOK_MAX_BODY"],
}
http_app = BodyLimit(http_app, settings.MAX_REQUEST_BODY, upload_limits)

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
