"""What the campaign page, the ledger and cancel cost on a campaign of N notifications.

Run it with ``bin/bench campaign_ledger [--recipients 1000000]``: it builds the audience and the
approved campaign as ``campaign_fanout`` does, fans it out, feeds the first
``NOTIFY_CAMPAIGN_FEED`` tasks, marks 10 % of the rows sent, and prints:

- one poll of the progress fragment's figures (``progress.progress_of``: the GROUP BY per state),
  median of 5, and the plan PostgreSQL picks for the GROUP BY;
- ``actions.cancel``: seconds until it returned (its transaction stops the fed rows; then its first
  chunk of the rest), and how many rows it counts cancelled; then the seconds the scheduler's
  ``fanout.stop_cancelled`` takes to write the rest, chunk by chunk;
- the ledger CSV streamed whole (``progress._csv_chunks``): seconds, rows, MiB, and the peak of
  Python's heap while streaming (tracemalloc), which stays flat however many rows.
"""

import argparse
import time
import tracemalloc

from backend.bench.campaign_fanout import _setup_django, add_audience, approved_campaign
from backend.bench.harness import timed


def _csv(campaign) -> tuple[int, int]:
    """Stream the ledger CSV as daphne would (an async iterator); (lines, bytes)."""
    from asgiref.sync import async_to_sync

    from frontend.campaigns import progress

    async def consume() -> tuple[int, int]:
        lines = size = 0
        async for chunk in progress._csv_chunks(campaign):
            lines += chunk.count("\n")
            size += len(chunk.encode())
        return lines, size

    return async_to_sync(consume)()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipients", type=int, default=200_000)
    args = parser.parse_args()
    _setup_django()

    from django.contrib.auth.models import User
    from django.db import connection
    from django.db.models import Count
    from django.utils import timezone

    from backend.notifications.models import Notification, State
    from campaigns import actions, fanout, ledger
    from campaigns.models import Campaign
    from frontend.campaigns import progress

    campaign = approved_campaign(add_audience(args.recipients, "list"))
    actions.start(campaign)
    fanout.fan_out(campaign.pk)
    fanout.feed()
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {Notification._meta.db_table} SET state = 'sent', sent_at = now(), provider = 'smtp'"
            " WHERE campaign_id = %s AND state = 'queued' AND queued_at IS NULL AND recipient_id %% 10 = 0",
            [campaign.pk],
        )
        cursor.execute("ANALYZE")
    campaign = Campaign.objects.get(pk=campaign.pk)
    print(f"$ bin/bench campaign_ledger --recipients {args.recipients}")
    print(f"made: {ledger.counts(campaign)}")

    poll, _ = timed(lambda: progress.progress_of(campaign, (time.time() - 4, 0)), repeat=5)
    with connection.cursor() as cursor:
        query, params = (
            Notification.objects.filter(campaign=campaign)
            .order_by()
            .values_list("state")
            .annotate(n=Count("pk"))
            .query.sql_with_params()
        )
        cursor.execute(f"EXPLAIN {query}", params)
        plan = " / ".join(row[0].strip() for row in cursor.fetchall()[:3])
    print(f"progress poll (counts per state): {poll * 1000:.0f} ms median of 5; plan: {plan}")

    cancel, cancelled = timed(lambda: actions.cancel(campaign, User.objects.get(username="approver")))
    stopped = ledger.counts(cancelled)[State.CANCELLED]
    print(f"cancel: {cancel:.2f} s until it returned, {stopped:,} rows counted cancelled")
    started, chunks = time.perf_counter(), 0
    while fanout.stop_cancelled():
        chunks += 1
    print(f"the scheduler wrote the rest in {time.perf_counter() - started:.1f} s ({chunks} chunks of 50,000)")

    tracemalloc.start()
    started = time.perf_counter()
    lines, size = _csv(cancelled)
    streamed = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(
        f"ledger CSV: {lines - 1:,} rows, {size / 2**20:.1f} MiB in {streamed:.1f} s "
        f"({(lines - 1) / streamed:,.0f} rows/s); Python heap peak while streaming {peak / 2**20:.1f} MiB"
    )
    print(f"finished at {timezone.now():%H:%M:%S}")


if __name__ == "__main__":
    main()
