"""What an SMS costs: segments × the provider's price per segment in the destination country.

The price list is a CSV file at ``settings.NOTIFY["SMS_PRICES"]``, one row per
provider and country::

    # comment lines and blank lines are skipped
    provider,country,price_per_segment,currency
    twilio,SA,0.0450,USD

``country`` is ISO 3166-1 alpha-2, ``price_per_segment`` a decimal string
(kept exact as ``Decimal``), ``currency`` ISO 4217. With no provider named, a
country is priced by the provider the platform sends SMS with (the first of the
providers file's SMS route, ``routed_sms_provider``) when the list has prices
for it, else by the country's first row. The
destination country of a number is the region ``phonenumbers`` assigns to it
(``+1 416…`` is CA, not US). Segments come from ``sms_encoding``.

The parsed list is cached per path and re-read when the file's modification
time or size changes, so an operator can update prices without a restart.
"""

import csv
import os
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

import phonenumbers
from django.conf import settings

# Used when the price list names no provider for a country (DESIGN.md §1: twilio is the primary).
DEFAULT_PROVIDER = "twilio"
COLUMNS = ("provider", "country", "price_per_segment", "currency")
_COUNTRY = re.compile(r"[A-Z]{2}")
_CURRENCY = re.compile(r"[A-Z]{3}")


class PricingError(ValueError):
    """No price can be given for this request; the message says why, for a person to act on."""


class InvalidNumber(PricingError):
    """The destination is not a valid international (E.164) phone number of a country."""


class UnknownCountry(PricingError):
    """The price list has no price for the destination country (with that provider)."""


class UnknownProvider(PricingError):
    """The price list does not name this provider at all."""


class PriceListError(RuntimeError):
    """The price list file cannot be read or is malformed; the message names the file and line.

    An operator's mistake, not the caller's: the API lets it surface as a 500.
    """


@dataclass(frozen=True)
class SegmentPrice:
    """One row of the price list: what one segment sent by ``provider`` to ``country`` costs, in ``currency``."""

    provider: str
    country: str
    per_segment: Decimal
    currency: str


@dataclass(frozen=True)
class Quote:
    """The cost of sending a message of ``segments`` segments to ``recipients`` recipients in ``country``.

    ``amount`` = ``per_segment`` × ``segments`` × ``recipients``, exact (no
    rounding), in ``currency``.
    """

    provider: str
    country: str
    currency: str
    per_segment: Decimal
    segments: int
    recipients: int
    amount: Decimal

    @property
    def per_message(self) -> Decimal:
        """What one recipient's message costs: ``per_segment`` × ``segments``."""
        return self.per_segment * self.segments


@dataclass(frozen=True)
class PriceList:
    """A parsed price list: ``prices[(provider, country)]``; ``providers`` in order of first appearance."""

    prices: dict[tuple[str, str], SegmentPrice] = field(default_factory=dict)
    providers: tuple[str, ...] = ()

    def providers_for(self, country: str) -> list[str]:
        """The providers with a price for ``country``, most preferred first (file order)."""
        return [provider for provider, row_country in self.prices if row_country == country]

    def default_provider(self, country: str) -> str:
        """The provider ``country`` is priced by when none is named.

        The one SMS are sent by (``routed_sms_provider``) when the list prices it anywhere, as a send
        records its cost (none where it has no price for the country); else the country's first row,
        else ``DEFAULT_PROVIDER``.
        """
        routed = routed_sms_provider()
        if routed in self.providers:
            return routed
        return next(iter(self.providers_for(country)), DEFAULT_PROVIDER)

    def preferred_providers(self, country: str) -> list[str]:
        """``providers_for(country)``, the one ``default_provider`` names first when it has a price there."""
        default = self.default_provider(country)
        return sorted(self.providers_for(country), key=lambda provider: provider != default)


def routed_sms_provider() -> str | None:
    """The adapter type (``twilio``) of the first provider of the providers file's SMS route, or None.

    What the delivery engine sends every SMS with first (``providers_for_channel``): a price quoted
    before sending (the editor, ``POST /api/v1/sms/segments``, a campaign's pre-flight) is its price.
    """
    from backend.notifications.models import Channel
    from backend.notifications.providers.config import providers_config

    config = providers_config()
    names = config.routes.get(Channel.SMS) or []
    provider = config.providers.get(names[0]) if names else None
    return provider.type if provider is not None else None


def decimal_str(value: Decimal) -> str:
    """``value`` as a plain decimal string: ``0.0001``, never ``1E-4``."""
    return format(value, "f")


# --- the price list file --------------------------------------------------------------------------------------------


def _content_lines(path: str) -> list[tuple[int, list[str]]]:
    """(line number, CSV fields) of every line that is neither blank nor a ``#`` comment."""
    with open(path, encoding="utf-8", newline="") as file:
        numbered = list(enumerate(file, start=1))
    return [
        (number, next(csv.reader([line])))
        for number, line in numbered
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _parse_row(values: dict[str, str]) -> SegmentPrice:
    """One row's fields, validated; raises ``ValueError`` naming the bad value."""
    provider = values["provider"].strip().lower()
    country = values["country"].strip().upper()
    currency = values["currency"].strip().upper()
    if not provider:
        raise ValueError("empty provider")
    if not _COUNTRY.fullmatch(country):
        raise ValueError(f"country {values['country']!r} is not an ISO 3166-1 alpha-2 code")
    if not _CURRENCY.fullmatch(currency):
        raise ValueError(f"currency {values['currency']!r} is not an ISO 4217 code")
    try:
        price = Decimal(values["price_per_segment"].strip())
    except InvalidOperation:
        price = Decimal("NaN")
    if not price.is_finite() or price < 0:
        raise ValueError(f"price_per_segment {values['price_per_segment']!r} is not a decimal number ≥ 0")
    return SegmentPrice(provider, country, price, currency)


def _check_header(path: str, lines: list[tuple[int, list[str]]]) -> list[str]:
    """The column names in file order; raises ``PriceListError`` unless they are exactly ``COLUMNS``."""
    if not lines:
        raise PriceListError(f"{path}: no header line; expected the columns {', '.join(COLUMNS)}")
    number, header = lines[0]
    columns = [name.strip() for name in header]
    if sorted(columns) != sorted(COLUMNS):
        raise PriceListError(
            f"{path}, line {number}: expected the columns {', '.join(COLUMNS)}, got {', '.join(columns)}"
        )
    return columns


def _row(path: str, number: int, columns: list[str], fields: list[str]) -> SegmentPrice:
    if len(fields) != len(columns):
        raise PriceListError(f"{path}, line {number}: expected {len(columns)} fields, got {len(fields)}")
    try:
        return _parse_row(dict(zip(columns, fields, strict=True)))
    except ValueError as exc:
        raise PriceListError(f"{path}, line {number}: {exc}") from None


def load_price_list(path: str) -> PriceList:
    """Parse the CSV price list at ``path``; raises ``PriceListError`` naming the line at fault."""
    try:
        lines = _content_lines(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise PriceListError(f"{path}: cannot read the SMS price list: {exc}") from exc
    columns = _check_header(path, lines)
    prices: dict[tuple[str, str], SegmentPrice] = {}
    for number, fields in lines[1:]:
        row = _row(path, number, columns, fields)
        if (row.provider, row.country) in prices:
            raise PriceListError(f"{path}, line {number}: a second price for {row.provider} in {row.country}")
        prices[(row.provider, row.country)] = row
    providers = tuple(dict.fromkeys(provider for provider, _ in prices))
    return PriceList(prices=prices, providers=providers)


# Path → ((mtime in ns, size), parsed list). Two threads that miss at once both
# parse and one result wins: harmless, so no lock on the request path.
_cache: dict[str, tuple[tuple[int, int], PriceList]] = {}


def price_list() -> PriceList:
    """The price list at ``settings.NOTIFY["SMS_PRICES"]``, parsed once per change of the file."""
    path = str(settings.NOTIFY["SMS_PRICES"])
    try:
        stat = os.stat(path)
    except OSError as exc:
        raise PriceListError(f"{path}: cannot read the SMS price list: {exc.strerror}") from exc
    stamp = (stat.st_mtime_ns, stat.st_size)
    cached = _cache.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    prices = load_price_list(path)
    _cache[path] = (stamp, prices)
    return prices


# --- prices ---------------------------------------------------------------------------------------------------------


def country_for_number(number: str) -> str:
    """The ISO 3166-1 alpha-2 country of an international phone number (``+966501234567`` → ``SA``).

    Raises ``InvalidNumber`` for a number without ``+`` and country code, one
    that does not parse, one not valid for its country, and a non-geographic
    one (``+800…``), which has no country to price.
    """
    if not number.strip().startswith("+"):
        raise InvalidNumber("Give the number in international format, starting with + and the country code.")
    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException as exc:
        raise InvalidNumber(f"Not a phone number: {exc}.") from None
    # phonenumbers.is_valid_number is exactly this pair; calling both finds the region twice (the
    # costlier half for a calling code many countries share, as +1's), once per SMS a worker sends.
    region = phonenumbers.region_code_for_number(parsed)
    if not phonenumbers.is_valid_number_for_region(parsed, region):
        raise InvalidNumber("Not a valid phone number for its country.")
    if not region or not _COUNTRY.fullmatch(region):  # "001" is the region of non-geographic numbers
        raise InvalidNumber("A non-geographic number belongs to no country; it has no SMS price.")
    return region


def phone_country(number: str) -> str:
    """``country_for_number(number)``, or "" for a blank number or one that has no country to price.

    What ``Recipient.phone_country`` holds beside the phone, so that a delivery prices an SMS
    without parsing its number again.
    """
    if not number:
        return ""
    try:
        return country_for_number(number)
    except InvalidNumber:
        return ""


def known_provider(provider: str, prices: PriceList | None = None) -> str:
    """``provider`` in lower case, as the price list spells it; ``UnknownProvider`` if the list never names it.

    ``prices`` is the list already read, if the caller has it (each read checks the file's stamp).
    """
    prices = price_list() if prices is None else prices
    name = provider.strip().lower()
    if name not in prices.providers:
        known = ", ".join(prices.providers) or "none"
        raise UnknownProvider(f"Unknown SMS provider {name!r}; the price list has: {known}.")
    return name


def segment_price(country: str, provider: str | None = None) -> SegmentPrice:
    """The price of one segment to ``country`` by ``provider`` (default: the country's first in the list).

    Raises ``UnknownProvider`` for a provider the list never names and
    ``UnknownCountry`` when there is no price for the country (with that provider).
    """
    prices = price_list()
    country = country.strip().upper()
    provider = prices.default_provider(country) if provider is None else known_provider(provider, prices)
    price = prices.prices.get((provider, country))
    if price is not None:
        return price
    others = prices.providers_for(country)
    if others:
        raise UnknownCountry(
            f"Provider {provider!r} has no SMS price for {country}; providers with one: {', '.join(others)}."
        )
    raise UnknownCountry(f"No SMS price for {country} in the price list.")


def _quote(price: SegmentPrice, segments: int, recipients: int) -> Quote:
    if segments < 0 or recipients < 0:
        raise ValueError(f"segments and recipients must be ≥ 0, got {segments} and {recipients}")
    amount = price.per_segment * segments * recipients
    return Quote(price.provider, price.country, price.currency, price.per_segment, segments, recipients, amount)


def price_message(segments: int, to: str, provider: str | None = None, country: str = "") -> Quote:
    """The cost of one message of ``segments`` segments to the E.164 number ``to``.

    ``country`` is ``to``'s country when the caller has it (``Recipient.known_phone_country``, which
    ``phone_country`` computed), and ``to`` is not parsed again; "" parses it.
    Raises ``InvalidNumber``, ``UnknownCountry`` or ``UnknownProvider``.
    """
    return _quote(segment_price(country or country_for_number(to), provider), segments, 1)


def price_audience(segments: int, recipients: int, country: str, provider: str | None = None) -> Quote:
    """The cost of sending a message of ``segments`` segments to ``recipients`` people in ``country``.

    Raises ``UnknownCountry`` or ``UnknownProvider``.
    """
    return _quote(segment_price(country, provider), segments, recipients)
