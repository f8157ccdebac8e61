"""Shared by the benchmarks: percentiles, a median time, CPU used, a test client's start-up, waiting for daphne."""

import argparse
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def nearest_rank(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0–100) of an ascending list: a value that was measured."""
    return sorted_values[max(0, math.ceil(q / 100 * len(sorted_values)) - 1)]


def interpolated(values: list[float], q: int) -> float:
    """Percentile ``q`` (1–99) interpolated between samples (``statistics.quantiles``, inclusive); 0.0 when empty."""
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def timed(work: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    """Seconds of wall clock ``work()`` takes, median of ``repeat`` calls, and what its last call returned."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def client_benchmark_main(run: Callable[[int], bool], description: str, default_calls: int) -> None:
    """Parse ``--calls``, set Django up for its test client, run ``run(calls)`` and exit 0 when the target was met."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--calls", type=int, default=default_calls, help=f"measured calls per text (default {default_calls})"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "backend.settings")
    import django
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()  # lets the test client's host "testserver" through ALLOWED_HOSTS
    sys.exit(0 if run(args.calls) else 1)


def answers_healthz(process: subprocess.Popen, url: str, timeout: float = 60.0) -> bool:
    """Whether the server ``process`` at ``url`` answered ``/healthz`` with 200 within ``timeout`` seconds.

    False when it exited first or never answered; the caller kills it and says why.
    """
    import requests

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                return True
        except requests.RequestException:  # not listening yet, or still importing Django
            time.sleep(0.2)
    return False


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used, from ``/proc/PID/stat``; 0.0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
