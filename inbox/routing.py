"""WebSocket routes of the in-app inbox (served by daphne through backend/asgi.py)."""

websocket_urlpatterns: list = []
