"""Worker and scheduler processes for tests: the real commands of deploy/Procfile, as subprocesses."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import requests
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def run_embedded(tmp_path: Path, script: str):
    """Run ``script`` in ``manage.py shell`` on the embedded default (SQLite, no Redis) in ``tmp_path``.

    Migrates a new SQLite file first; returns the JSON the script printed after ``RESULT``.
    """
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'notify.sqlite3'}", "REDIS_URL": ""}
    env["NOTIFY_DATA_DIR"] = str(tmp_path)
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300)
    done = subprocess.run(
        [*manage, "shell", "-c", script], cwd=ROOT, env=env, check=True, timeout=120, capture_output=True, text=True
    )
    return json.loads(done.stdout.split("RESULT", 1)[1])


def test_database_url() -> str:
    """The URL of pytest-django's test database, for processes that must share it."""
    db = connection.settings_dict
    password = f":{db['PASSWORD']}" if db["PASSWORD"] else ""
    return f"postgres://{db['USER']}{password}@{db['HOST']}:{db['PORT']}/{db['NAME']}"


class Processes:
    """Starts manage.py commands against the test database, Redis and SMTP sink; stops them all at the end."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.running: list[subprocess.Popen] = []

    def start(self, *command: str) -> subprocess.Popen:
        """Run ``manage.py <command>``."""
        return self._spawn(sys.executable, "manage.py", *command)

    def start_web(self) -> str:
        """Run daphne as deploy/Procfile does, on a free port; return its base URL once it answers."""
        from backend.stubs.smtp_sink import free_port

        port = free_port()
        # A listen backlog of 256: the default would reset connections of a burst of concurrent callers.
        endpoint = f"tcp:port={port}:interface=127.0.0.1:backlog=256"
        self._spawn(sys.executable, "-m", "daphne", "-e", endpoint, "backend.asgi:application")
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(f"{url}/healthz"), 30, "daphne to answer")
        return url

    def start_procfile_web(self) -> str:
        """Run deploy/Procfile's ``web`` line (the HTTP web tier) on a free port; its base URL once it answers."""
        from backend.stubs.smtp_sink import free_port

        port = free_port()
        line = next(line for line in (ROOT / "deploy" / "Procfile").read_text().splitlines() if line.startswith("web:"))
        env = {**self.env, "WEB_PORT": str(port), "WEB_CONCURRENCY": "1", "PATH": _with_venv_bin(self.env)}
        process = subprocess.Popen(
            ["sh", "-c", f"exec {line.split(':', 1)[1].strip()}"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.running.append(process)
        url = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(f"{url}/healthz"), 30, "the web tier to answer")
        return url

    def _spawn(self, *argv: str) -> subprocess.Popen:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.running.append(process)
        return process

    def kill(self, process: subprocess.Popen) -> None:
        """``kill -9``: no cleanup, no goodbye, as when a machine dies."""
        process.send_signal(signal.SIGKILL)
        process.wait()

    def stop_all(self) -> None:
        for process in self.running:
            if process.poll() is None:
                process.terminate()
        for process in self.running:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def _with_venv_bin(env: dict[str, str]) -> str:
    """PATH with this interpreter's bin folder first, where the Procfile's commands (granian, daphne) live."""
    return os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])


def worker_env(smtp_port: int, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "REDIS_URL": settings.REDIS_URL,
        "EMAIL_HOST": "127.0.0.1",
        "EMAIL_PORT": str(smtp_port),
        "NOTIFY_DATA_DIR": str(settings.DATA_DIR),
        **extra,
    }


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.ConnectionError:
        return False


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
