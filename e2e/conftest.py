"""Browser tests: Playwright driving Debian's Chromium against pytest-django's live server.

``playwright install`` cannot download browsers here, so the launch points
at the system Chromium (``CHROMIUM_PATH``, default /usr/bin/chromium).
"""

import os
import threading
from pathlib import Path

import pytest

from backend.stubs.provider_server import StubServer
from tests.providers_setup import write_providers_file

# Playwright's sync API runs an event loop in this thread; the ORM calls that
# the tests make between page actions are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

SCREENSHOTS = Path(__file__).resolve().parent.parent / "test-results"


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    return {
        **browser_type_launch_args,
        "executable_path": os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"),
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--disable-quic",
            "--disable-sync",
        ],
    }


@pytest.fixture
def screenshot(page):
    """Save a full-page screenshot to test-results/<name>.png (for people to look at)."""

    def _shot(name: str) -> Path:
        SCREENSHOTS.mkdir(exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return _shot


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def patient_previews(settings):
    """Chromium, the live server and PostgreSQL share two cores here: a preview that waits out a
    scheduling hiccup must not be cut at the product's 1.5 s (tests/test_render_bounds.py tests that cut)."""
    settings.NOTIFY = {**settings.NOTIFY, "PREVIEW_TIMEOUT": 10.0}


@pytest.fixture(autouse=True)
def empty_redis():
    """Each browser test starts with empty queues and counters (rate limits, OTP limits pile up otherwise)."""
    from backend.notifications.queues import HUEYS

    HUEYS["high"].storage.conn.flushdb()


@pytest.fixture(autouse=True)
def no_csp_violations(request):
    """Fail a browser test whose pages broke the Content-Security-Policy (settings.py): it would block them in use."""
    if "page" not in request.fixturenames:
        yield
        return
    page = request.getfixturevalue("page")
    refused: list[str] = []
    page.on("console", lambda message: "Content Security Policy" in message.text and refused.append(message.text))
    yield
    assert refused == []


@pytest.fixture
def stub(tmp_path, settings):
    """The stub SMS providers, with a budget that never makes the test wait.

    Made in a thread of its own: its constructor runs an event loop, and Playwright's runs in this one.
    """
    made: list[StubServer] = []
    starter = threading.Thread(target=lambda: made.append(StubServer()))
    starter.start()
    starter.join()
    server = made[0]
    path = write_providers_file(tmp_path / "providers.toml", server.url, twilio={"rate": 1000})
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    yield server
    server.stop()


@pytest.fixture
def mail_sink(tmp_path, settings) -> Path:
    """A real SMTP sink (aiosmtpd) that Django's SMTP settings point at; returns the folder its .eml files land in."""
    from backend.stubs.smtp_sink import start_sink

    folder = tmp_path / "mail"
    controller = start_sink(folder)
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    yield folder
    controller.stop()
