"""What a user may choose as language and time zone: one list for the API and the preference center."""

import zoneinfo
from functools import lru_cache

from django.conf.locale import LANG_INFO


@lru_cache(maxsize=1)
def time_zone_names() -> frozenset[str]:
    """Every IANA time zone a user may choose; "Factory" and "localtime" are tzdata artefacts, not places."""
    return frozenset(zoneinfo.available_timezones()) - {"Factory", "localtime"}


@lru_cache(maxsize=1)
def language_codes() -> frozenset[str]:
    """Every language a user may choose: ISO 639-1 (or 639-2) codes Django knows, without a region."""
    return frozenset(code for code in LANG_INFO if "-" not in code)


def is_language(code: str) -> bool:
    """An ISO 639-1 (or 639-2) code Django knows, without a region (``ar``, not ``ar-EG``)."""
    return code in language_codes()
