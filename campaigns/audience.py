"""Who a segment reaches, and a fingerprint of it for the content hash."""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db.models import F, QuerySet

from backend.notifications.models import Recipient
from campaigns import segment_query
from campaigns.models import Segment, SegmentMember


class AudienceUnavailable(Exception):
    """The segment's members cannot be listed; the message says why."""


class AudienceTimedOut(AudienceUnavailable):
    """A filter segment's count ran past ``NOTIFY_SEGMENT_COUNT_TIMEOUT``: it may succeed later, on a quieter DB."""


@dataclass(frozen=True)
class Audience:
    """A segment's size and a SHA-256 (hex) of its members' user ids, sorted, one per line."""

    size: int
    digest: str


def recipients(segment: Segment) -> QuerySet[Recipient]:
    """The recipients of ``segment``: a list's members, or what a filter matches now (one query either way).

    Raises ``AudienceUnavailable`` when a filter's stored definition is not valid (segment_query.py).
    """
    if segment.kind == Segment.Kind.LIST:
        return Recipient.objects.filter(pk__in=SegmentMember.objects.filter(segment=segment).values("recipient_id"))
    try:
        return segment_query.recipients(segment.definition)
    except segment_query.DefinitionError as exc:
        raise AudienceUnavailable(f"Segment {segment.name!r} has a filter that cannot be used: {exc}") from exc


def ids_between(segment: Segment, after: int, upper: int | None = None) -> QuerySet:
    """The recipient ids of ``segment`` with ``after`` < id ≤ ``upper`` (no upper bound when None), as one column
    ``member``: the fan-out's batch ranges.

    A list segment reads its members on the (segment, recipient) index within the range: written as
    ``recipients(segment)`` with the range outside it, PostgreSQL hashed all of a million members for
    every batch, three times a batch. Raises ``AudienceUnavailable`` like ``recipients``.
    """
    if segment.kind == Segment.Kind.LIST:
        ids = SegmentMember.objects.filter(segment=segment, recipient_id__gt=after).annotate(member=F("recipient_id"))
        if upper is not None:
            ids = ids.filter(recipient_id__lte=upper)
    else:
        ids = recipients(segment).filter(pk__gt=after).annotate(member=F("pk"))
        if upper is not None:
            ids = ids.filter(pk__lte=upper)
    return ids.order_by().values("member")


def audience(segment: Segment) -> Audience:
    """Count and fingerprint ``segment``'s members now (streamed: a list may hold millions).

    Raises ``AudienceUnavailable`` for a filter that cannot be used or not counted in
    ``NOTIFY["SEGMENT_COUNT_TIMEOUT"]`` seconds (``bounded``).
    """
    digest, size = hashlib.sha256(), 0
    members = recipients(segment).order_by("user_id").values_list("user_id", flat=True)
    with bounded(segment):
        for user_id in members.iterator(chunk_size=5000):
            digest.update(user_id.encode() + b"\n")
            size += 1
    return Audience(size=size, digest=digest.hexdigest())


@contextmanager
def bounded(segment: Segment) -> Iterator[None]:
    """``segment_query.time_bound`` for queries over a filter segment's audience; a timeout is ``AudienceTimedOut``.

    A list segment is not bounded: its cost is its size, capped at upload, not what someone wrote in a filter.
    """
    if segment.kind == Segment.Kind.LIST:
        yield
        return
    try:
        with segment_query.time_bound():
            yield
    except segment_query.CountTimeout as exc:
        raise AudienceTimedOut(f"Segment {segment.name!r}: {exc}") from exc
