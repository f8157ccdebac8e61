"""Running totals of what happened to notifications, added as it happens, for ``/metrics`` (metrics.py).

A Prometheus counter is a running total. Read from the notification table it cost a scan of every
row at each scrape (0.5 s at 1,000,000 rows, and growing with whatever history retention keeps), so
each writer of a notification's history (every ``StateChange``) adds what it moved instead, once its
transaction has committed:

- ``("accepted", tier)``: rows made (their first state, whatever it is: queued, scheduled, suppressed);
- ``("state", tier, state)``: rows that entered ``state``;
- ``("outcome", provider, state)``: rows that entered ``sent``, ``delivered`` or ``undelivered``,
  by the provider that took them (a row names its provider once sent; failures per provider are
  the ``attempt`` results);
- ``("attempt", provider, result)``: provider calls whose result was recorded;
- ``("latency", tier, bucket)``: accept (or ``send_at``) → sent, per ``LATENCY_BUCKETS`` bucket
  (``le_<seconds>``), with ``count`` and ``sum_us`` (microseconds, to stay an integer).

Where they live: one Redis hash (``HINCRBY``, one pipeline per transaction) when ``REDIS_URL`` is
set; else the ``MetricCounter`` table, as the embedded default's web and workers are separate
processes that share only the database.

Best effort, as any process's Prometheus counters are: an increment is lost when Redis is
unreachable at that commit (logged) or the process dies between the commit and the count, and all of
them when Redis loses its data, which Prometheus sees as a counter reset (``rate()`` and
``increase()`` handle it). The database stays the record of each notification (DESIGN.md §3).
"""

import bisect
import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime

from django.db import connection, transaction

from backend.notifications.delivery.shared_state import RedisUnavailable, guard, redis_client
from backend.notifications.models import MetricCounter, State

logger = logging.getLogger(__name__)

# The Redis hash holding every counter, one field per counter (its key joined by "|").
HASH = "notify:metrics"

# Accept → sent, seconds: an OTP should land under the first buckets (DESIGN.md §8: p95 ≤ 300 ms),
# a deferred or retried standard notification in the last ones.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

# States a provider's name goes with: where the traffic a provider took ended up.
OUTCOMES = (State.SENT, State.DELIVERED, State.UNDELIVERED)

Key = tuple[str, ...]


def entered(tier: str, from_state: str, to_state: str, count: int = 1, provider: str = "") -> Counter[Key]:
    """The counters ``count`` rows of ``tier`` moving ``from_state`` → ``to_state`` add (``from_state`` "" = made)."""
    counts: Counter[Key] = Counter({("state", tier, to_state): count})
    if not from_state:
        counts["accepted", tier] += count
    if provider and to_state in OUTCOMES:
        counts["outcome", provider, to_state] += count
    return counts


def sent_latency(tier: str, due: datetime, sent_at: datetime) -> Counter[Key]:
    """The latency histogram's counters for one row of ``tier`` due at ``due`` and sent at ``sent_at``."""
    return sent_latencies(tier, [(sent_at - due).total_seconds()])


def sent_latencies(tier: str, seconds: Iterable[float]) -> Counter[Key]:
    """``sent_latency``'s counters for many rows of ``tier`` at once, given each row's latency in seconds.

    A row counts in every bucket from the first whose bound holds it (Prometheus ``le``); a negative
    latency (another machine's clock behind) counts as 0. Binary search and one running sum, not a
    ``Counter`` per row: a batch's 50 rows cost 7.9 µs each that way.
    """
    firsts = [0] * (len(LATENCY_BUCKETS) + 1)
    count = total_us = 0
    for value in seconds:
        value = max(value, 0.0)
        firsts[bisect.bisect_left(LATENCY_BUCKETS, value)] += 1
        count += 1
        total_us += round(value * 1e6)
    counts: Counter[Key] = Counter({("latency", tier, "count"): count, ("latency", tier, "sum_us"): total_us})
    held = 0
    for bucket, first in zip(LATENCY_BUCKETS, firsts, strict=False):
        held += first
        if held:
            counts["latency", tier, f"le_{bucket:g}"] = held
    return counts


def add(counts: Mapping[Key, int]) -> None:
    """Add ``counts`` to the running totals once the current transaction commits (at once outside one).

    Never raises: the change is committed by then, and a count that fails (SQLite busy on the
    embedded default, say) is logged by Django rather than turning a stored send into a 500.
    """
    frozen = {key: n for key, n in counts.items() if n}
    if frozen:
        transaction.on_commit(lambda: _store(frozen), robust=True)


def add_changes(changes: Iterable[tuple[str, str, str, str]]) -> None:
    """``add`` the counters of rows moved, each given as (tier, from_state, to_state, provider or "")."""
    counts: Counter[Key] = Counter()
    for tier, from_state, to_state, provider in changes:
        counts.update(entered(tier, from_state, to_state, provider=provider))
    add(counts)


def totals() -> dict[Key, int]:
    """Every counter's total now; raises ``RedisUnavailable`` when Redis is configured and unreachable."""
    client = redis_client()
    if client is None:
        named = MetricCounter.objects.values_list("name", "value")
    else:
        with guard("metric counters for /metrics"):
            named = client.hgetall(HASH).items()
    return {tuple(name.split("|")): int(value) for name, value in named}


def _store(counts: dict[Key, int]) -> None:
    client = redis_client()
    if client is None:
        _store_in_database(counts)
        return
    try:
        with guard("metric counters"):
            pipe = client.pipeline(transaction=False)
            for key, n in counts.items():
                pipe.hincrby(HASH, "|".join(key), n)
            pipe.execute()
    except RedisUnavailable as exc:
        logger.warning("metric counters not added (%s): %d totals miss this change", exc, len(counts))


def _store_in_database(counts: dict[Key, int]) -> None:
    table = connection.ops.quote_name(MetricCounter._meta.db_table)
    rows = sorted(("|".join(key), n) for key, n in counts.items())  # one order: two writers never deadlock
    with transaction.atomic(), connection.cursor() as cursor:  # one commit, not one per counter
        cursor.executemany(
            f"INSERT INTO {table} (name, value) VALUES (%s, %s)"
            f" ON CONFLICT (name) DO UPDATE SET value = {table}.value + excluded.value",
            rows,
        )
