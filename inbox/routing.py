"""WebSocket routes of the in-app inbox (served by daphne through backend/asgi.py)."""

from django.urls import path

from inbox.consumers import InboxConsumer

websocket_urlpatterns = [
    path("ws/inbox/", InboxConsumer.as_asgi(), name="inbox-ws"),
]
