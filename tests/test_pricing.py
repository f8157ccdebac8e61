"""SMS prices: segments × the provider's price per segment in the number's country, from the CSV price list."""

import os
import re
from decimal import Decimal
from pathlib import Path

import pytest

from backend.notifications import pricing
from backend.notifications.pricing import (
    InvalidNumber,
    PriceListError,
    UnknownCountry,
    UnknownProvider,
    country_for_number,
    phone_country,
    price_audience,
    price_message,
    segment_price,
)

HEADER = "provider,country,price_per_segment,currency\n"


@pytest.fixture
def price_file(tmp_path, settings):
    """Point settings at a CSV written by the test; returns a writer."""
    path = tmp_path / "prices.csv"
    settings.NOTIFY = {**settings.NOTIFY, "SMS_PRICES": str(path)}

    def write(text: str, mtime_ns: int | None = None) -> Path:
        path.write_text(text, encoding="utf-8")
        if mtime_ns is not None:
            os.utime(path, ns=(mtime_ns, mtime_ns))
        return path

    return write


# --- the shipped price list ---


def test_the_shipped_list_prices_eight_countries_for_both_providers():
    prices = pricing.price_list()
    assert prices.providers == ("twilio", "vonage")
    for country in ["SA", "AE", "EG", "IR", "US", "GB", "DE", "IN"]:
        for provider in ["twilio", "vonage"]:
            price = segment_price(country, provider)
            assert price.currency == "USD"
            assert price.per_segment > 0


def test_the_shipped_list_defaults_to_the_first_provider_of_each_country():
    assert segment_price("SA").provider == "twilio"
    assert segment_price("EG").provider == "vonage"


# --- the country of a number ---


@pytest.mark.parametrize(
    ("number", "country"),
    [
        ("+966501234567", "SA"),
        ("+966 50 123 4567", "SA"),
        ("+971501234567", "AE"),
        ("+201001234567", "EG"),
        ("+989121234567", "IR"),
        ("+14155552671", "US"),
        ("+14165550123", "CA"),  # +1 is shared: the area code decides
        ("+447400123456", "GB"),
        ("+447911123456", "GG"),  # a Guernsey mobile range inside +44
        ("+4915112345678", "DE"),
        ("+919812345678", "IN"),
    ],
)
def test_the_country_comes_from_the_number(number, country):
    assert country_for_number(number) == country


@pytest.mark.parametrize(
    ("number", "message"),
    [
        ("0501234567", "Give the number in international format, starting with + and the country code."),
        ("+966 12", "Not a valid phone number for its country."),
        ("+abc", "Not a phone number: (1) The string supplied did not seem to be a phone number.."),
        ("+80012345678", "A non-geographic number belongs to no country; it has no SMS price."),
    ],
)
def test_an_unusable_number_is_refused_with_a_reason(number, message):
    with pytest.raises(InvalidNumber, match=f"^{re.escape(message)}$"):
        country_for_number(number)


@pytest.mark.parametrize(
    ("number", "country"),
    [
        ("+966501234567", "SA"),
        ("+14165550123", "CA"),
        ("+447911123456", "GG"),
        ("", ""),  # no phone
        ("0501234567", ""),  # not international
        ("+966 12", ""),  # not valid for its country
        ("+80012345678", ""),  # non-geographic
    ],
)
def test_a_phones_stored_country_is_its_country_or_empty(number, country):
    assert phone_country(number) == country


# --- prices ---


def test_one_message_costs_segments_times_the_price(price_file):
    price_file(HEADER + "twilio,SA,0.0250,USD\n")
    quote = price_message(3, "+966501234567")
    assert (quote.provider, quote.country, quote.currency, quote.per_segment, quote.segments) == (
        "twilio", "SA", "USD", Decimal("0.0250"), 3,
    )  # fmt: skip
    assert quote.amount == Decimal("0.0750")
    assert pricing.decimal_str(quote.amount) == "0.0750"


def test_a_message_priced_by_a_country_the_caller_has_does_not_parse_its_number(price_file, monkeypatch):
    price_file(HEADER + "twilio,SA,0.0250,USD\ntwilio,CA,0.0100,USD\n")
    monkeypatch.setattr(pricing, "country_for_number", lambda number: pytest.fail(f"{number} parsed"))
    quote = price_message(2, "+966501234567", "twilio", country="CA")
    assert (quote.country, quote.amount) == ("CA", Decimal("0.0200"))


def test_a_message_without_a_known_country_is_priced_by_its_number(price_file):
    price_file(HEADER + "twilio,SA,0.0250,USD\ntwilio,CA,0.0100,USD\n")
    assert price_message(2, "+14165550123", "twilio", country="").country == "CA"
    with pytest.raises(InvalidNumber, match=r"^A non-geographic number belongs to no country"):
        price_message(1, "+80012345678", "twilio", country="")


def test_an_audience_costs_segments_times_recipients_times_the_price(price_file):
    price_file(HEADER + "twilio,SA,0.0250,USD\nvonage,SA,0.0200,USD\n")
    quote = price_audience(2, 10_000, "sa", provider="Vonage")
    assert (quote.provider, quote.recipients, quote.per_message, quote.amount) == (
        "vonage", 10_000, Decimal("0.0400"), Decimal("400.0000"),
    )  # fmt: skip


def test_prices_are_exact_decimals(price_file):
    price_file(HEADER + "twilio,US,0.0079,USD\n")
    assert price_audience(3, 1_000_000, "US").amount == Decimal("23700.0000")
    assert pricing.decimal_str(price_audience(1, 1, "US").amount) == "0.0079"


def test_decimal_str_never_uses_exponents():
    assert pricing.decimal_str(Decimal("1E-7")) == "0.0000001"


def test_the_first_provider_of_the_country_is_the_default(price_file):
    price_file(HEADER + "twilio,SA,0.05,USD\nvonage,IR,0.09,USD\ntwilio,IR,0.10,USD\n")
    assert price_message(1, "+989121234567").provider == "vonage"
    assert price_message(1, "+966501234567").provider == "twilio"


def test_an_unknown_provider_is_refused_naming_the_known_ones(price_file):
    price_file(HEADER + "twilio,SA,0.05,USD\nvonage,SA,0.04,USD\n")
    with pytest.raises(
        UnknownProvider, match=re.escape("Unknown SMS provider 'acme'; the price list has: twilio, vonage.")
    ):
        price_message(1, "+966501234567", provider="acme")


def test_a_country_without_a_price_is_refused(price_file):
    price_file(HEADER + "twilio,SA,0.05,USD\n")
    with pytest.raises(UnknownCountry, match=re.escape("No SMS price for JP in the price list.")):
        price_message(1, "+81312345678")


def test_a_provider_without_a_price_for_the_country_names_those_with_one(price_file):
    price_file(HEADER + "twilio,SA,0.05,USD\nvonage,IR,0.09,USD\n")
    message = "Provider 'twilio' has no SMS price for IR; providers with one: vonage."
    with pytest.raises(UnknownCountry, match=re.escape(message)):
        price_message(1, "+989121234567", provider="twilio")


def test_negative_counts_are_refused(price_file):
    price_file(HEADER + "twilio,SA,0.05,USD\n")
    with pytest.raises(ValueError, match="segments and recipients must be ≥ 0, got 1 and -1"):
        price_audience(1, -1, "SA")


# --- the file: cached, reloaded on change, validated ---


def test_the_list_is_parsed_once_and_reloaded_when_the_file_changes(price_file):
    price_file(HEADER + "twilio,SA,0.05,USD\n", mtime_ns=1_700_000_000_000_000_000)
    first = pricing.price_list()
    assert pricing.price_list() is first
    price_file(HEADER + "twilio,SA,0.07,USD\n", mtime_ns=1_700_000_001_000_000_000)
    assert pricing.price_list() is not first
    assert segment_price("SA").per_segment == Decimal("0.07")


def test_comments_blank_lines_and_column_order_are_free(price_file):
    price_file("# prices\n\ncurrency,price_per_segment,country,provider\n  # more\nUSD,0.05,sa,Twilio\n")
    assert segment_price("SA", "twilio").per_segment == Decimal("0.05")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", ": no header line; expected the columns provider, country, price_per_segment, currency"),
        ("provider,country,price\n", ", line 1: expected the columns provider, country, price_per_segment, currency, "
         "got provider, country, price"),
        (HEADER + "twilio,SA,0.05\n", ", line 2: expected 4 fields, got 3"),
        (HEADER + "twilio,Saudi,0.05,USD\n", ", line 2: country 'Saudi' is not an ISO 3166-1 alpha-2 code"),
        (HEADER + "twilio,SA,five cents,USD\n", ", line 2: price_per_segment 'five cents' is not a decimal number ≥ 0"),
        (HEADER + "twilio,SA,-0.05,USD\n", ", line 2: price_per_segment '-0.05' is not a decimal number ≥ 0"),
        (HEADER + "twilio,SA,NaN,USD\n", ", line 2: price_per_segment 'NaN' is not a decimal number ≥ 0"),
        (HEADER + "twilio,SA,0.05,dollars\n", ", line 2: currency 'dollars' is not an ISO 4217 code"),
        (HEADER + ",SA,0.05,USD\n", ", line 2: empty provider"),
        (HEADER + "twilio,SA,0.05,USD\n# x\ntwilio,sa,0.06,USD\n", ", line 4: a second price for twilio in SA"),
    ],
)  # fmt: skip
def test_a_malformed_list_is_refused_naming_the_line(price_file, text, message):
    path = price_file(text)
    with pytest.raises(PriceListError) as caught:
        pricing.price_list()
    assert str(caught.value) == f"{path}{message}"


def test_a_missing_list_is_a_price_list_error(settings, tmp_path):
    settings.NOTIFY = {**settings.NOTIFY, "SMS_PRICES": str(tmp_path / "nowhere.csv")}
    with pytest.raises(PriceListError, match=re.escape(f"{tmp_path / 'nowhere.csv'}: cannot read the SMS price list")):
        pricing.price_list()
