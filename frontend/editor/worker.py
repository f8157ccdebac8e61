"""The worker process that renders staff previews, under a wall-clock limit and a memory limit.

The sandbox's bounds (``backend/notifications/sandbox.py``) stop every way we
know of for a template to run long or grow big; this worker is the backstop
for the ways we do not know, so that a preview never holds the web process.

One persistent worker per web process, started on the first preview with the
``forkserver`` method (never ``fork``: daphne has threads). A call answers
within ``NOTIFY["PREVIEW_TIMEOUT"]`` seconds or raises ``PreviewTimeout``;
the worker is then killed and the next call starts a new one. The worker's
address space may grow ``NOTIFY["PREVIEW_MEMORY_MB"]`` beyond what it has once
Django is loaded (``RLIMIT_AS``), so a runaway render gets ``MemoryError``
instead of the machine's memory. Calls are one at a time (a lock): a render
takes milliseconds, and one worker per web process keeps memory flat.
"""

import importlib
import logging
import multiprocessing
import resource
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from django.conf import settings

logger = logging.getLogger(__name__)

# Seconds a new worker may take to load Django before it counts as broken.
_START_TIMEOUT = 60.0
# Loaded by the worker before it says it is ready, so that the first preview is not slowed by imports.
_PRELOAD = ("backend.notifications.rendering", "frontend.editor.preview")


class PreviewTimeout(Exception):
    """The worker did not answer in time (or died); it has been replaced."""


def _limit_memory(extra_mb: int) -> None:
    """Cap the address space at its current size plus ``extra_mb`` MiB (Linux ``/proc/self/statm``)."""
    with open("/proc/self/statm") as statm:
        current = int(statm.read().split()[0]) * resource.getpagesize()
    limit = current + extra_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _serve(conn: Connection, memory_mb: int) -> None:
    """The worker's loop: ``(func, args)`` in, ``(True, result)`` or ``(False, exception)`` out."""
    import django

    django.setup()
    for name in _PRELOAD:
        importlib.import_module(name)
    _limit_memory(memory_mb)
    conn.send((True, "ready"))
    while True:
        try:
            func, args = conn.recv()
        except EOFError:
            return  # the web process is gone
        try:
            answer = (True, func(*args))
        except Exception as exc:
            answer = (False, exc)
        try:
            conn.send(answer)
        except Exception as exc:  # an unpicklable result or exception
            conn.send((False, RuntimeError(f"{exc.__class__.__name__}: {exc}")))


class _Worker:
    def __init__(self, memory_mb: int) -> None:
        context = multiprocessing.get_context("forkserver")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, memory_mb), daemon=True, name="preview-worker")
        self.process.start()
        child.close()
        try:
            if not self.conn.poll(_START_TIMEOUT):
                raise PreviewTimeout(f"the preview worker did not start within {_START_TIMEOUT:g} s")
            self.conn.recv()
        except (PreviewTimeout, EOFError, OSError) as exc:
            self.stop()
            raise PreviewTimeout(f"the preview worker did not start ({exc})") from exc

    def call(self, func: Callable, args: tuple, timeout: float) -> tuple[bool, Any]:
        """``(True, result)`` or ``(False, the exception func raised)``; raises when the worker fails."""
        self.conn.send((func, args))
        if not self.conn.poll(timeout):
            raise PreviewTimeout(f"the preview took longer than {timeout:g} s and was stopped")
        return self.conn.recv()

    def stop(self) -> None:
        self.process.kill()
        self.process.join()
        self.conn.close()


_lock = threading.Lock()
_worker: _Worker | None = None


def run(func: Callable, *args: Any, timeout: float | None = None) -> Any:
    """``func(*args)`` in the worker process: its result, or the exception it raised.

    ``func`` and ``args`` must pickle (a module-level function, plain data).
    ``timeout`` (seconds) defaults to ``NOTIFY["PREVIEW_TIMEOUT"]``. Raises
    ``PreviewTimeout`` when the answer does not come in time or the worker
    died; the worker is then killed and a new one started in the background,
    so that the next preview does not wait for Django to load.
    """
    global _worker
    timeout = settings.NOTIFY["PREVIEW_TIMEOUT"] if timeout is None else timeout
    with _lock:
        worker = _running()
        try:
            ok, value = worker.call(func, args, timeout)
        except (PreviewTimeout, EOFError, OSError) as exc:
            worker.stop()
            _worker = None
            threading.Thread(target=_replace, daemon=True, name="preview-worker-start").start()
            if isinstance(exc, PreviewTimeout):
                raise
            raise PreviewTimeout(f"the preview worker stopped ({exc.__class__.__name__})") from exc
    if not ok:
        raise value
    return value


def _running() -> _Worker:
    """The worker, started if there is none or it died; call with ``_lock`` held."""
    global _worker
    if _worker is None or not _worker.process.is_alive():
        _worker = _Worker(settings.NOTIFY["PREVIEW_MEMORY_MB"])
    return _worker


def _replace() -> None:
    with _lock:
        try:
            _running()
        except PreviewTimeout:
            logger.exception("the preview worker did not start; the next preview tries again")
