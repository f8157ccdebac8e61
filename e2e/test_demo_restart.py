"""``bin/demo`` started twice in a row prints the same API key, and the key of the first start still works.

The real script on its own ports (WEB_PORT / EMAIL_PORT / STUB_PORT) and its own data folder, without the
test run's PostgreSQL and Redis: the demo's embedded default (SQLite), as a new user runs it.
"""

import os
import queue
import re
import signal
import subprocess
import threading
import time

import pytest
import requests

from backend.stubs.smtp_sink import free_port
from tests.processes import ROOT

pytestmark = pytest.mark.e2e

KEY_LINE = re.compile(r"^\s*API key\s+(ntf_\S+)\s*$")
# The test run's servers and settings: the demo must use its own embedded default instead.
NOT_FOR_THE_DEMO = ("DATABASE_URL", "REDIS_URL", "NOTIFY_", "HUEY_", "EMAIL_", "DEBUG", "SERVE_STATIC")


class Demo:
    """One ``bin/demo`` run: its banner's key, then stopped as Ctrl-C would (SIGINT to its process group)."""

    def __init__(self, env: dict[str, str]):
        self.process = subprocess.Popen(
            ["bin/demo"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def key(self, timeout: float = 240) -> str:
        """The key of the banner, once the product answers (first start: venv check, migrations, demo data)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.process.poll() is None, "bin/demo ended:\n" + "".join(self.seen[-40:])
                continue
            self.seen.append(line)
            if match := KEY_LINE.match(line):
                return match.group(1)
        raise AssertionError("no API key in bin/demo's banner:\n" + "".join(self.seen[-40:]))

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def demo_env(tmp_path) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith(NOT_FOR_THE_DEMO)}
    ports = {"WEB_PORT": free_port(), "EMAIL_PORT": free_port(), "STUB_PORT": free_port()}
    return {**env, **{name: str(port) for name, port in ports.items()}, "NOTIFY_DATA_DIR": str(tmp_path / "var")}


def test_bin_demo_twice_prints_the_same_key_and_the_first_key_still_works(demo_env):
    first = Demo(demo_env)
    try:
        key = first.key()
    finally:
        first.stop()
    second = Demo(demo_env)
    try:
        assert second.key() == key
        answer = requests.get(
            f"http://127.0.0.1:{demo_env['WEB_PORT']}/api/v1/users/u-ar-1",
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["user_id"] == "u-ar-1"
    finally:
        second.stop()
