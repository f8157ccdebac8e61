"""The support explorer's one search box: what a query names, and the notifications it finds, in order.

A query is read as one of these kinds (``KINDS``); "auto" tries them in the order below and
keeps the first that finds something, so a page of results and the next one always search
the same way (the kind is carried in the URL):

- ``notification``: a notification id (UUID) — the primary key;
- ``campaign``: ``campaign:12`` (or ``campaign 12``) — listed by user id, not newest first: the
  UNIQUE (scope, key) index ``notification_idempotency`` read in order over the scope
  ``campaign:<id>`` (each key is ``campaign:<id>:<user id>``, compared bytewise, collation "C").
  A campaign's rows are all made within its fan-out's minutes, and an index in time order would
  cost every fan-out insert (``notification_campaign_idx`` stays (campaign, state));
- ``user``: the company's user id — ``Recipient.user_id`` UNIQUE, then
  ``notification_recipient_idx`` (recipient, created_at);
- ``phone``: a number in any form a caller reads out (``+966 50 123 4567``,
  ``00966501234567``, ``0501234567`` in ``settings.SUPPORT["DEFAULT_REGION"]``), made E.164 by
  phonenumbers; a national number not valid there, as each region would read it (``09121234567``
  is Iran's +989121234567, and 13 other countries') — ``Recipient.phone``'s index, then the recipient index;
- ``email``: any case — ``recipient_email_upper_idx`` (UPPER(email)), then the recipient index;
- ``key``: an idempotency key — the UNIQUE (scope, key) index, once per scope that exists
  (each API client's, ``internal``, ``digest``, ``campaign:<id>`` for a campaign's keys): a key
  is never indexed alone, which every campaign insert would pay for;
- ``reference``: a provider's reference — ``notification_ref_search_idx``.

There is no search without a query: "every failed SMS this week" over every notification would
need an index on the creation time alone, paid by every insert of a million-row campaign.
Filters (``Filters``) narrow a search; ``page`` pages it by keyset, never by OFFSET: (created_at, id)
newest first, or a campaign's idempotency key.
"""

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import phonenumbers
from django.conf import settings
from django.db.models import Q, QuerySet
from django.db.models.functions import Upper
from django.utils.dateparse import parse_datetime

from backend.notifications.models import ApiClient, Notification, Recipient

# The order "auto" tries them in: ids first, then what a person reads out.
KINDS = ("notification", "campaign", "user", "phone", "email", "key", "reference")
KIND_LABELS = {
    "notification": "notification id",
    "campaign": "campaign id",
    "user": "user id",
    "phone": "phone number",
    "email": "email address",
    "key": "idempotency key",
    "reference": "provider reference",
}
PAGE_SIZE = 50
MAX_QUERY = 255
_CAMPAIGN = re.compile(r"campaign[:#\s]\s*(\d{1,18})", re.IGNORECASE)
# What a caller reads out as a phone number: digits, a leading + or 00, spaces, dots, dashes, brackets.
_PHONE = re.compile(r"\+?[\d\s().\-]{6,30}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


class SearchError(ValueError):
    """The query or a filter cannot be read; ``str()`` says why, for the agent (a 400)."""


@dataclass(frozen=True)
class Lookup:
    """How a query is searched: its ``kind``, the ``value`` as searched (E.164, UUID…) and the rows' condition.

    ``campaign_id`` is set for a campaign search, which is listed and paged by idempotency key; ``warning``
    is what the agent must know before reading the rows out (several people found by one national number).
    """

    kind: str
    value: str
    condition: Q
    campaign_id: int | None = None
    warning: str = ""

    @property
    def label(self) -> str:
        return f"{KIND_LABELS[self.kind]} {self.value}"

    @property
    def by_key(self) -> bool:
        """Whether its rows are listed by idempotency key (a campaign's: by user id), not newest first."""
        return self.campaign_id is not None

    @property
    def order(self) -> str:
        """The order of its rows, as the page says it."""
        return "listed by user id" if self.by_key else "newest first"


@dataclass(frozen=True)
class Filters:
    """What narrows a search; an empty string (or None) is no filter. Times are aware datetimes."""

    state: str = ""
    reason: str = ""
    kind: str = ""
    channel: str = ""
    provider: str = ""
    priority: str = ""
    since: datetime | None = None
    until: datetime | None = None

    def condition(self) -> Q:
        """The filters as one condition on Notification."""
        q = Q()
        for name, lookup in (("state", "state"), ("reason", "reason"), ("channel", "channel"),
                             ("provider", "provider"), ("priority", "priority"), ("kind", "kind__name")):  # fmt: skip
            value = getattr(self, name)
            if value:
                q &= Q(**{lookup: value})
        if self.since:
            q &= Q(created_at__gte=self.since)
        if self.until:
            q &= Q(created_at__lt=self.until)
        return q


_DAMAGED = "That page link is damaged: start the search again."


@dataclass(frozen=True)
class Cursor:
    """Where the next page starts: after the row created at ``created_at`` with id ``id`` (newest first),
    or, for a campaign (``Lookup.by_key``), after the row whose idempotency key is ``key``.

    Written ``<ISO time>~<uuid>`` or ``key~<key>`` (a key may hold any character but a control one).
    """

    created_at: datetime | None = None
    id: uuid.UUID | None = None
    key: str | None = None

    def __str__(self) -> str:
        if self.key is not None:
            return f"key~{self.key}"
        return f"{self.created_at.isoformat()}~{self.id}"

    @classmethod
    def parse(cls, text: str) -> "Cursor":
        """Read ``str(cursor)`` back; raises ``SearchError`` for anything else."""
        at, _, rest = text.partition("~")
        if at == "key":
            if not rest or len(rest) > MAX_QUERY or _CONTROL.search(rest):
                raise SearchError(_DAMAGED)
            return cls(key=rest)
        try:
            created_at, parsed_id = parse_datetime(at), uuid.UUID(rest)
            created_at = created_at.astimezone(UTC) if created_at and created_at.tzinfo else None
        except (ValueError, OverflowError):
            created_at = None
        if created_at is None:
            raise SearchError(_DAMAGED)
        return cls(created_at, parsed_id)

    def condition(self) -> Q:
        """Rows strictly after this one: by key, or in (created_at DESC, id DESC) with ``<=`` bounding the scan."""
        if self.key is not None:
            return Q(idempotency_key__gt=self.key)
        return Q(created_at__lte=self.created_at) & (
            Q(created_at__lt=self.created_at) | Q(created_at=self.created_at, id__lt=self.id)
        )


@dataclass
class Page:
    """One page of results in the lookup's order (``Lookup.order``), and the next page's cursor (None on the last)."""

    lookup: Lookup | None
    rows: list[Notification] = field(default_factory=list)
    next_cursor: Cursor | None = None


def _compact(text: str) -> str:
    """A phone number as typed without its spaces, dots, dashes and brackets."""
    return re.sub(r"[\s().\-]", "", text)


def national_phone(text: str, region: str | None = None) -> str | None:
    """``text`` as an E.164 number if it reads as a valid one, national numbers in ``region``; else None.

    ``00`` before the country code is read as ``+`` (the international prefix of most countries).
    ``region`` defaults to ``settings.SUPPORT["DEFAULT_REGION"]``.
    """
    compact = _compact(text)
    if compact.startswith("00"):
        compact = "+" + compact[2:]
    try:
        number = phonenumbers.parse(compact, region or settings.SUPPORT["DEFAULT_REGION"])
    except phonenumbers.NumberParseException:
        return None
    if not phonenumbers.is_valid_number(number):
        return None
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def phone_readings(text: str) -> list[str]:
    """Every E.164 number ``text`` can be as a national number of some region, sorted; [] if none or international.

    An Iranian caller reads out ``0912 123 4567``, a Saudi one ``050 123 4567``: without the country code the
    digits are valid in many regions (``0912…`` in 14, Iran among them), so the search looks for each. Costs
    a parse per region phonenumbers knows (about 30 ms), only for a number not valid in the default region.
    """
    compact = _compact(text)
    if compact.startswith(("+", "00")):
        return []
    readings = set()
    for region in phonenumbers.SUPPORTED_REGIONS:
        try:
            number = phonenumbers.parse(compact, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(number):
            readings.add(phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164))
    return sorted(readings)


def candidates(query: str) -> list[Lookup]:
    """Every kind ``query`` could be, in ``KINDS`` order; a user id, phone or email costs an indexed recipient query."""
    query = query.strip()
    found = []
    for kind in KINDS:
        lookup = lookup_as(query, kind, strict=False)
        if lookup is not None:
            found.append(lookup)
    return found


def lookup_as(query: str, kind: str, *, strict: bool = True) -> Lookup | None:
    """``query`` searched as ``kind``; None when it cannot be one (``strict``: raise ``SearchError`` instead)."""
    query = query.strip()
    lookup = _READERS[kind](query)
    if lookup is None and strict:
        raise SearchError(f"{query!r} is not a {KIND_LABELS[kind]}.")
    return lookup


def _as_notification(query: str) -> Lookup | None:
    try:
        pk = uuid.UUID(query)
    except ValueError:
        return None
    return Lookup("notification", str(pk), Q(pk=pk))


def _as_campaign(query: str) -> Lookup | None:
    match = _CAMPAIGN.fullmatch(query)
    if not match:
        return None
    campaign_id = int(match.group(1))
    # The scope alone picks the campaign's rows out of notification_idempotency; campaign_id is only a safeguard.
    condition = Q(idempotency_scope=f"campaign:{campaign_id}", campaign_id=campaign_id)
    return Lookup("campaign", str(campaign_id), condition, campaign_id=campaign_id)


def _recipients(kind: str, value: str, condition: Q) -> Lookup:
    """Notifications of the recipients matching ``condition``: their ids first (an index each), then theirs."""
    return Lookup(kind, value, Q(recipient_id__in=list(recipient_ids(condition))))


def recipient_ids(condition: Q) -> QuerySet:
    """The ids of at most 20 recipients matching ``condition`` (on ``recipients()``), in no particular order."""
    return recipients().filter(condition).order_by().values_list("pk", flat=True)[:20]


def _as_user(query: str) -> Lookup | None:
    if not query or len(query) > 128:
        return None
    return _recipients("user", query, Q(user_id=query))


def _as_phone(query: str) -> Lookup | None:
    if not _PHONE.fullmatch(query):
        return None
    e164 = national_phone(query)
    if e164 is not None:
        return _recipients("phone", e164, Q(phone=e164))
    readings = phone_readings(query)
    if not readings:
        return None
    # Named by the numbers someone has: "+989121234567", not the 14 countries' readings of 0912 123 4567.
    found = list(recipients().filter(phone__in=readings).order_by("phone").values_list("pk", "phone")[:20])
    numbers = sorted({phone for _, phone in found})
    value = " or ".join(numbers) or _compact(query)
    warning = (
        f"{len(numbers)} people in different countries have a number that reads as {query}: ask the caller which "
        "country their number is from before reading anything out."
        if len(numbers) > 1
        else ""
    )
    return Lookup("phone", value, Q(recipient_id__in=[pk for pk, _ in found]), warning=warning)


def _as_email(query: str) -> Lookup | None:
    if not _EMAIL.fullmatch(query):
        return None
    # UPPER(email) = UPPER(%s): the expression of recipient_email_upper_idx, whatever case either was typed in.
    return _recipients("email", query, Q(email_upper=query.upper()))


def _as_key(query: str) -> Lookup | None:
    if not query:
        return None
    return Lookup("key", query, Q(idempotency_scope__in=key_scopes(query), idempotency_key=query))


def _as_reference(query: str) -> Lookup | None:
    return Lookup("reference", query, Q(provider_ref=query)) if query else None


_READERS = {
    "notification": _as_notification,
    "campaign": _as_campaign,
    "user": _as_user,
    "phone": _as_phone,
    "email": _as_email,
    "key": _as_key,
    "reference": _as_reference,
}


def key_scopes(key: str) -> list[str]:
    """The idempotency scopes a key can be in (``actions.accept.scope_of``, ``campaigns/fanout.py``, digests).

    One UNIQUE-index probe per scope: a handful of API clients, ``internal`` and ``digest``, and for
    a campaign's key ``campaign:<id>:<user>`` its campaign's scope.
    """
    scopes = ["internal", "digest", *(f"client:{pk}" for pk in ApiClient.objects.values_list("pk", flat=True))]
    campaign = re.match(r"campaign:(\d+):", key)
    if campaign:
        scopes.append(f"campaign:{campaign.group(1)}")
    return scopes


def recipients() -> QuerySet[Recipient]:
    """Recipients with ``email_upper`` (UPPER(email)), which the email search filters on."""
    return Recipient.objects.alias(email_upper=Upper("email"))


def _rows(lookup: Lookup) -> QuerySet[Notification]:
    order = ("idempotency_key",) if lookup.by_key else ("-created_at", "-id")
    return Notification.objects.select_related("recipient", "kind").order_by(*order)


def resolve(query: str, kind: str = "auto") -> Lookup:
    """The lookup of ``query``: as ``kind``, or for "auto" the first candidate that finds a notification.

    Raises ``SearchError`` for an empty or over-long query, an unknown kind, or a query ``kind`` cannot read.
    """
    query = query.strip()
    if not query:
        raise SearchError("Type a user id, phone number, email, idempotency key, provider reference or id.")
    if len(query) > MAX_QUERY:
        raise SearchError(f"A search is at most {MAX_QUERY} characters.")
    _refuse_controls("The search", query)
    if kind != "auto":
        if kind not in KINDS:
            raise SearchError(f"Unknown kind of search {kind!r}: one of {', '.join(KINDS)}.")
        return lookup_as(query, kind)
    options = candidates(query)
    for lookup in options:
        if Notification.objects.filter(lookup.condition).exists():
            return lookup
    return options[0]


def page(lookup: Lookup, filters: Filters, after: Cursor | None = None, size: int = PAGE_SIZE) -> Page:
    """One page of the notifications ``lookup`` finds, narrowed by ``filters``, after ``after``, in its order.

    Raises ``SearchError`` for a cursor of the other order (a page link edited by hand).
    """
    if after is not None and (after.key is not None) != lookup.by_key:
        raise SearchError(_DAMAGED)
    found = list(query(lookup, filters, after, size + 1))
    rows = found[:size]
    if len(found) <= size:
        return Page(lookup, rows, None)
    last = rows[-1]
    cursor = Cursor(key=last.idempotency_key) if lookup.by_key else Cursor(last.created_at, last.id)
    return Page(lookup, rows, cursor)


def query(lookup: Lookup, filters: Filters, after: Cursor | None, limit: int) -> QuerySet:
    """The query of one page: the first ``limit`` rows in the lookup's order, as one ordered index range.

    A campaign's rows are the range ``idempotency_scope = 'campaign:<id>'`` of the UNIQUE
    (scope, key) index, read in key order from ``after``'s key: no sort of a million-row campaign,
    and no index in time order for its fan-out to pay. Filters are checked on the rows read, so
    a filter few of the campaign's rows match reads further along that range.
    """
    condition = filters.condition() & (after.condition() if after else Q())
    return _rows(lookup).filter(lookup.condition, condition)[:limit]


def each_row(lookup: Lookup, filters: Filters, batch: int = 2000) -> Iterator[Notification]:
    """Every notification of the search once, in its order, read a keyset page of ``batch`` at a time (exports)."""
    after = None
    while True:
        result = page(lookup, filters, after, batch)
        yield from result.rows
        if result.next_cursor is None:
            return
        after = result.next_cursor


def parse_filters(data: Any) -> Filters:
    """``Filters`` from a query dict (``state``, ``reason``, ``kind``, ``channel``, ``provider``, ``priority``,
    ``since``, ``until`` as ISO 8601 or ``YYYY-MM-DDTHH:MM`` in UTC); raises ``SearchError`` naming a bad one."""
    values = {name: data.get(name, "").strip()[:64] for name in ("state", "reason", "kind", "channel", "provider",
                                                                  "priority")}  # fmt: skip
    for name, value in values.items():
        _refuse_controls(name, value)
    times = {name: _when(name, data.get(name, "").strip()) for name in ("since", "until")}
    return Filters(**values, **times)


def _refuse_controls(name: str, text: str) -> None:
    """PostgreSQL refuses a statement holding NUL (a 500 otherwise); no id, number or address has a control."""
    if _CONTROL.search(text):
        raise SearchError(f"{name} may not contain control characters.")


def _when(name: str, text: str) -> datetime | None:
    if not text:
        return None
    try:
        parsed = parse_datetime(text)
        # In UTC: PostgreSQL refuses offsets past ±15:59 that parse_datetime takes (a DataError, a 500).
        parsed = parsed.astimezone(UTC) if parsed and parsed.tzinfo else parsed
    except (ValueError, OverflowError):
        parsed = None
    if parsed is None:
        raise SearchError(f"{name}: {text!r} is not a date and time like 2026-11-30T14:00.")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
