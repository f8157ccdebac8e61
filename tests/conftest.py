"""Shared fixtures: real PostgreSQL and Redis (started by bin/test), a real SMTP sink, named personas.

The suite refuses to run on the embedded default: SQLite and in-process
queues hide the concurrency this platform exists to get right.
"""

import email
import email.policy
import io
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from rest_framework.test import APIClient

from backend.notifications.models import ApiClient
from backend.notifications.queues import HUEYS
from backend.stubs.smtp_sink import SinkRules, start_sink
from tests.http_servers import servers, tls_authority  # noqa: F401 - fixtures shared by the outbound HTTP tests


def pytest_configure(config):
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine or not settings.REDIS_URL:
        pytest.exit(
            "The tests need PostgreSQL and Redis: run bin/test (it starts both), "
            "or set DATABASE_URL=postgres://… and REDIS_URL=redis://…",
            returncode=4,
        )


@pytest.fixture(autouse=True)
def empty_redis():
    """Each test starts with empty queues, counters and idempotency keys."""
    HUEYS["high"].storage.conn.flushdb()
    yield


class Sink:
    """A running SMTP sink and the mails it kept."""

    def __init__(self, folder: Path, controller):
        self.folder = folder
        self.controller = controller
        self.rules: SinkRules = controller.handler.rules
        self.port: int = controller.port

    def messages(self) -> list[email.message.EmailMessage]:
        return [
            email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
            for path in sorted(self.folder.glob("*.eml"))
        ]

    def wait_for(self, count: int, timeout: float = 10.0) -> list[email.message.EmailMessage]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.messages()
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"expected {count} mails in the sink within {timeout}s, got {len(self.messages())}")


@pytest.fixture
def smtp_sink(tmp_path, settings) -> Sink:
    """A real SMTP server on a free port; Django's SMTP backend points at it."""
    controller = start_sink(tmp_path / "mail")
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = controller.port
    yield Sink(tmp_path / "mail", controller)
    controller.stop()


@pytest.fixture
def demo_data(db):
    """The demo kinds, approved ar/en templates, recipients u-ar-1 / u-en-1 / u-fa-1 and staff."""
    call_command("demo_data", stdout=io.StringIO())


@pytest.fixture
def orders_service(db) -> tuple[ApiClient, str]:
    """The persona calling the API: the orders service with its key."""
    return ApiClient.issue("orders")


@pytest.fixture
def api(orders_service) -> APIClient:
    """An API client authenticated as the orders service."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {orders_service[1]}")
    return client


@pytest.fixture
def send(api) -> Callable:
    """POST /api/v1/notifications with an idempotency key; returns the response."""

    def _send(body: dict, key: str = "order-5012-shipped"):
        return api.post("/api/v1/notifications", body, format="json", HTTP_IDEMPOTENCY_KEY=key)

    return _send


def pending(tier: str) -> int:
    """Tasks waiting in ``tier``'s queue (Redis), scheduled ones excluded."""
    return HUEYS[tier].pending_count()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2's deliberate slowness would dominate the suite's time; no test is about it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def caller():
    """A batch worker thread's provider caller (``delivery.batch.Caller``), closed after the test."""
    from backend.notifications.delivery.batch import Caller

    caller = Caller()
    yield caller
    caller.close()


@pytest.fixture
def provider_stub():
    """The stub Twilio / Vonage / FCM / Web Push server, in a thread; ``.state`` holds faults and messages."""
    from backend.stubs.provider_server import StubServer

    server = StubServer()
    yield server
    server.stop()


@pytest.fixture
def stub_providers(provider_stub, tmp_path, settings):
    """Every provider pointed at the stub through a providers file (NOTIFY_PROVIDERS_FILE)."""
    from tests.providers_setup import write_providers_file

    path = write_providers_file(tmp_path / "providers.toml", provider_stub.url)
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path), "ALLOW_PRIVATE_PUSH_ENDPOINTS": True}
    return provider_stub


# --- personas: the demo's staff users (demo_data), by what they do ----------------------------------


@pytest.fixture
def editor(demo_data):
    """Writes templates: view, add and change template versions, no approval."""
    from django.contrib.auth.models import User

    return User.objects.get(username="editor")


@pytest.fixture
def approver(demo_data):
    """Approves other people's drafts; may not write templates."""
    from django.contrib.auth.models import User

    return User.objects.get(username="approver")


@pytest.fixture
def outsider(demo_data):
    """A support agent: staff, but nothing to do with templates."""
    from django.contrib.auth.models import User

    return User.objects.get(username="support")


@pytest.fixture
def marketer(demo_data):
    """Composes campaigns and segments; may not approve them."""
    from django.contrib.auth.models import User

    return User.objects.get(username="marketer")
