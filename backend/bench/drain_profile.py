"""Where a batch worker's CPU goes: one batch thread drains a backlog in this process under cProfile (issue 11).

Run it with ``bin/bench drain_profile [--notifications 20000] [--top 40]``: the stub providers in their
own process as for ``bin/bench drain``, the same backlog (half SMS on Twilio, half push on FCM), then
``batch.deliver_batch`` on batches of ``--batch`` popped from the queue until it is empty, profiled
with a CPU clock (``time.process_time``: what the profiler itself adds inflates call-heavy code, so
read the shares, not the times). It prints the CPU per notification and the functions by cumulative
and by own time, and writes the profile to ``--output`` for ``python -m pstats``.
"""

import argparse
import cProfile
import gc
import os
import pstats
import time

from backend.bench.drain import _providers_file, _wait_for_stub, build_backlog
from backend.bench.otp_latency import _setup_django, _start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notifications", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=200, help="Notifications per batch.")
    parser.add_argument("--top", type=int, default=40, help="Functions listed in each order.")
    parser.add_argument("--output", default="drain.prof", help="Where the profile is written.")
    args = parser.parse_args()
    _setup_django()
    gc.freeze()  # as run_worker does once loaded: the collector no longer walks Django's objects

    from django.conf import settings

    port = int(os.environ.get("BENCH_STUB_PORT", "8937"))
    stub = f"http://127.0.0.1:{port}"
    providers = _providers_file(stub, 1_000_000.0)
    settings.NOTIFY["PROVIDERS_FILE"] = providers
    stub_process = _start({**os.environ, "LOG_LEVEL": "WARNING"}, "manage.py", "provider_stub", "--port", str(port))
    try:
        _wait_for_stub(stub)
        build_backlog(args.notifications)

        from backend.notifications.delivery import batch
        from backend.notifications.tasks import pop_deliveries

        caller = batch.Caller()
        try:
            # The first batch opens the connections and compiles the templates: not what a batch costs.
            batch.deliver_batch(pop_deliveries("standard", args.batch), "standard", caller)
            profile = cProfile.Profile(time.process_time)
            cpu, done = time.process_time(), 0
            profile.enable()
            while ids := pop_deliveries("standard", args.batch):
                batch.deliver_batch(ids, "standard", caller)
                done += len(ids)
            profile.disable()
            cpu = time.process_time() - cpu
        finally:
            caller.close()
        print(f"{done:,} notifications, {cpu / max(done, 1) * 1e6:,.0f} µs of CPU each under the profiler")
        profile.dump_stats(args.output)
        stats = pstats.Stats(profile)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)
    finally:
        stub_process.terminate()
        stub_process.wait(timeout=30)


if __name__ == "__main__":
    main()
