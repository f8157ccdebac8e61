"""The pre-flight: what a campaign would do if it went out now, counted set-based in SQL.

``preflight(campaign, now)`` wraps the fan-out's own per-recipient verdict query
(``fanout.verdicts``) in one ``GROUP BY`` — reason, language of the template sent,
time zone, template version and phone prefix — so its counts are what the fan-out
would make, by construction, and no recipient row ever reaches Python. From those
groups it derives (the shape is in ``/work/helpers/CAMPAIGNS.md``, kept by the composer,
the review page, the running page and the PDF report):

* ``audience``, ``stopped`` per policy reason, ``will_send`` and ``languages``;
* ``waves``: one per UTC offset at the campaign's wall time for a ``local_time``
  schedule (``waves.waves``), else one at the start (``now``) or at ``send_at``;
* ``sms``: segments per template version, rendered with the campaign's params, × the price
  per segment of each destination country (``pricing``), total and per country, and the worst
  case with every declared param at its ``max_length`` (``frontend.editor.preview.measure_sms``,
  which the template review page uses too);
* ``rate_per_second`` and ``expected_end``: the expected pace of a spread or rate-limited
  campaign and when it should be done (``pacing.expected_pace``), else the budget's;
* ``budget_per_second``: the standard tier's share of the channel's primary provider's
  rate in the providers file (``rate × (1 − high_share)``, as ``delivery.budget`` splits
  it), and ``duration_seconds``: each wave's size over it, summed (None: no budget).

Countries come from the E.164 number: SQL groups by a prefix long enough to name the
region — the calling code (ITU codes are prefix-free, so "+" and three digits hold it),
the area code for a code shared by several regions (+1 NANP, +7, +44…) — and each
distinct prefix is mapped to a region with phonenumbers, in the order
``region_code_for_number`` tries them (as ``segment_query._country_q`` does).
"""

import copy
import functools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import phonenumbers
from django.db import connection
from django.db.models import Max

from backend.notifications import pricing
from backend.notifications.models import Channel, Recipient, TemplateVersion
from campaigns import actions, fanout, pacing
from campaigns.audience import bounded
from campaigns.models import Campaign, ScheduleMode
from campaigns.pacing import standard_budget
from campaigns.waves import iso_z, waves
from frontend.editor.preview import measure_sms

MONEY = Decimal("0.0001")
# Digits after the calling code that tell apart the regions sharing it (NANP: the 3-digit area code).
SHARED_CODE_DIGITS = {1: 3}
# Elsewhere six: +44 7911 1… is Guernsey, +44 7911 2… Great Britain.
DEFAULT_SHARED_DIGITS = 6
# Filler digits that make a prefix a whole number phonenumbers can classify (NANP subscribers are [2-9]\d{6}).
_FILLER = "234567890123"


@dataclass(frozen=True)
class Group:
    """One row of the pre-flight's GROUP BY: ``count`` audience members sharing these values."""

    reason: str
    language: str
    time_zone: str
    version_id: int | None
    prefix: str
    count: int


def preflight(campaign: Campaign, now: datetime) -> dict[str, Any]:
    """The pre-flight figures of ``campaign`` (saved or not) as of ``now``.

    Without ``template_versions`` it counts with the ones submit would resolve (the newest approved).

    Returns the JSON-able dict described in the module docstring: instants ISO 8601 UTC
    ending in Z, money as decimal strings with 4 places. Raises
    ``audience.AudienceUnavailable`` (a filter that no longer validates or cannot be counted in time),
    ``rendering.RenderError`` (a template that cannot render the params) and
    ``pricing.PriceListError`` (an unreadable price list) and ``actions.CampaignRefused`` (no approved template).
    """
    if not campaign.template_versions:
        campaign = copy.copy(campaign)
        campaign.template_versions = actions.resolved_templates(campaign)
    groups = count_groups(campaign)
    sending = [g for g in groups if not g.reason]
    stopped = Counter[str]()
    for group in groups:
        if group.reason:
            stopped[group.reason] += group.count
    languages = Counter[str]()
    versions = TemplateVersion.objects.in_bulk({g.version_id for g in sending if g.version_id})
    for group in sending:
        languages[versions[group.version_id].language] += group.count
    will_send = sum(g.count for g in sending)
    wave_list = _waves(campaign, now, sending, will_send)
    budget = standard_budget(campaign.channel)
    rate, expected_end = pacing.expected_pace(campaign, wave_list, budget, _zone_sizes(sending))
    return {
        "computed_at": iso_z(now),
        "audience": sum(g.count for g in groups),
        "stopped": dict(sorted(stopped.items())),
        "will_send": will_send,
        "languages": dict(sorted(languages.items())),
        "waves": wave_list,
        "sms": _sms(campaign, sending, versions) if campaign.channel == Channel.SMS else None,
        "budget_per_second": budget,
        "duration_seconds": round(sum(w["size"] / budget for w in wave_list), 2) if budget else None,
        "rate_per_second": rate,
        "expected_end": expected_end,
    }


def count_groups(campaign: Campaign) -> list[Group]:
    """The audience of ``campaign`` grouped by verdict, in one query over ``fanout.verdicts``.

    Bounded like every filter's count (``audience.bounded``): past ``NOTIFY["SEGMENT_COUNT_TIMEOUT"]``
    seconds it raises ``audience.AudienceUnavailable``.
    """
    with bounded(campaign.segment):
        plan = fanout.make_plan(campaign)
        upper = Recipient.objects.aggregate(upper=Max("pk"))["upper"] or 0
        verdicts_sql, params = fanout.verdicts(plan, 0, upper)
        prefix = phone_prefix_sql("v.phone") if campaign.channel == Channel.SMS else "''"
        sql = (
            f"SELECT v.reason, v.language, v.time_zone, v.version_id, {prefix} AS prefix, COUNT(*)"
            f" FROM ({verdicts_sql}) v GROUP BY 1, 2, 3, 4, 5"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [Group(*row) for row in cursor.fetchall()]


def phone_prefix_sql(column: str) -> str:
    """A SQL expression of the prefix of E.164 ``column`` that names its region (see the module docstring)."""
    whens = []
    for code, digits in sorted(_shared_codes().items()):
        length = 1 + len(str(code))  # "+" and the code
        whens.append(f"WHEN substr({column}, 1, {length}) = '+{code}' THEN substr({column}, 1, {length + digits})")
    return f"CASE {' '.join(whens)} ELSE substr({column}, 1, 4) END"


def _shared_codes() -> dict[int, int]:
    """Calling code → digits after it that the prefix keeps, for every code several regions share."""
    return {
        code: SHARED_CODE_DIGITS.get(code, DEFAULT_SHARED_DIGITS)
        for code, regions in phonenumbers.COUNTRY_CODE_TO_REGION_CODE.items()
        if len(regions) > 1
    }


@functools.lru_cache(maxsize=4096)
def region_for_prefix(prefix: str) -> str | None:
    """The ISO 3166-1 alpha-2 region of the numbers starting with ``prefix`` (from ``phone_prefix_sql``).

    None for an empty or malformed prefix, an unknown calling code, and a non-geographic
    one (+800…). For a shared code the regions are tried in phonenumbers' order
    (``region_code_for_number``): one whose leading digits start the prefix, or one where
    the prefix padded with filler digits to a length its numbers have is a valid number;
    when none fits, the code's main region. A region told apart only by digits beyond the
    prefix is the one the filler lands in: the price of a few numbers, never a wrong count.
    """
    digits = prefix[1:]
    if not prefix.startswith("+") or not digits.isdigit():
        return None
    for length in (1, 2, 3):
        code = int(digits[:length])
        regions = phonenumbers.COUNTRY_CODE_TO_REGION_CODE.get(code)
        if regions and len(digits) >= length:
            return _shared_region(code, digits[length:], regions) if len(regions) > 1 else _geographic(regions[0])
    return None


def _geographic(region: str) -> str | None:
    return region if re.fullmatch(r"[A-Z]{2}", region) else None


def _shared_region(code: int, national: str, regions: tuple[str, ...]) -> str | None:
    for region in regions:
        metadata = phonenumbers.PhoneMetadata.metadata_for_region(region)
        if metadata is None:
            continue
        if metadata.leading_digits:
            if re.match(metadata.leading_digits, national):
                return _geographic(region)
            continue
        if any(_valid_in(region, code, national, length) for length in metadata.general_desc.possible_length):
            return _geographic(region)
    return _geographic(regions[0])


def _valid_in(region: str, code: int, national: str, length: int) -> bool:
    """Whether ``national`` padded with filler digits to ``length`` is a valid number of ``region``."""
    if length < len(national):
        return False
    try:
        number = phonenumbers.parse(f"+{code}{national}{_FILLER[: length - len(national)]}", None)
    except phonenumbers.NumberParseException:
        return False
    return phonenumbers.is_valid_number_for_region(number, region)


def _zone_sizes(sending: list[Group]) -> Counter[str]:
    """Recipients who will be sent, per IANA time zone."""
    zones = Counter[str]()
    for group in sending:
        zones[group.time_zone] += group.count
    return zones


def _waves(campaign: Campaign, now: datetime, sending: list[Group], will_send: int) -> list[dict[str, Any]]:
    zones = _zone_sizes(sending)
    if campaign.schedule_mode == ScheduleMode.LOCAL_TIME and campaign.local_time is not None:
        return [wave.as_dict() for wave in waves(campaign.local_time, now, dict(zones))]
    # One wave for every zone at once: no offset of its own ("UTC+00:00" read as if it were London's). Sent
    # as soon as approved, its instant is only when the pre-flight ran; ``when`` says which.
    scheduled = campaign.schedule_mode == ScheduleMode.AT and campaign.send_at
    at, when = (campaign.send_at, "at") if scheduled else (now, "now")
    return [{"at": iso_z(at), "utc_offset": "", "when": when, "zones": sorted(zones), "size": will_send}]


def _sms(campaign: Campaign, sending: list[Group], versions: dict[int, TemplateVersion]) -> dict[str, Any]:
    measured = {pk: measure_sms(version, campaign.params) for pk, version in versions.items()}
    per_language: dict[str, dict[str, Any]] = {}
    countries: dict[str | None, dict[str, int]] = defaultdict(lambda: {"recipients": 0, "segments": 0, "worst": 0})
    for group in sending:
        version, size = versions[group.version_id], measured[group.version_id]
        row = per_language.setdefault(
            version.language,
            {"language": version.language, "encoding": size.encoding, "segments": size.segments, "recipients": 0},
        )
        row["recipients"] += group.count
        country = countries[region_for_prefix(group.prefix)]
        country["recipients"] += group.count
        country["segments"] += group.count * size.segments
        country["worst"] += group.count * size.worst
    return _priced(per_language, countries)


def _priced(per_language: dict[str, dict[str, Any]], countries: dict[str | None, dict[str, int]]) -> dict[str, Any]:
    rows, total, worst_total, currency = [], Decimal(0), Decimal(0), "USD"
    for country, figures in sorted(countries.items(), key=lambda item: item[0] or "~"):
        row: dict[str, Any] = {"country": country, "recipients": figures["recipients"],
                               "segments": figures["segments"], "price_per_segment": None, "cost": None}  # fmt: skip
        if country is not None:
            try:
                price = pricing.segment_price(country)
            except pricing.PricingError:
                price = None
            if price is not None:
                currency = price.currency
                cost = price.per_segment * figures["segments"]
                total += cost
                worst_total += price.per_segment * figures["worst"]
                row |= {"price_per_segment": money(price.per_segment), "cost": money(cost)}
        rows.append(row)
    return {
        "currency": currency,
        "per_language": [per_language[language] for language in sorted(per_language)],
        "per_country": rows,
        "total": money(total),
        "worst_case_total": money(worst_total),
    }


def money(amount: Decimal) -> str:
    """``amount`` as a decimal string with 4 places (``pricing.decimal_str``): ``63.0000``."""
    return pricing.decimal_str(amount.quantize(MONEY))
