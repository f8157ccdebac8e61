"""The demo's static files (daphne serves /static/ itself when SERVE_STATIC is on): a path off the folders is a 404.

Found by outside testing: ``GET /static/%2e%2e/%2e%2e/etc/passwd`` answered 500 (SuspiciousFileOperation).
"""

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator

from backend.asgi import StaticFiles, django_asgi_app


@async_to_sync
async def status_of(path: str) -> int:
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [], "http_version": "1.1", "scheme": "http", "server": ("testserver", 80)}  # fmt: skip
    communicator = ApplicationCommunicator(StaticFiles(django_asgi_app), scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(5)
    await communicator.wait(5)
    return start["status"]


@pytest.mark.parametrize("path", ["/static/../../etc/passwd", "/static/../settings.py", "/static/inbox/../../../x"])
def test_a_path_that_leaves_the_static_folders_is_404(path):
    assert status_of(path) == 404


def test_a_static_file_is_served():
    assert status_of("/static/inbox/widget.js") == 200
