"""What a user may choose as language and time zone, and which way a language is written.

One list for the API and the preference center, and one direction function for every page,
mail, preview, PDF and widget: both from CLDR (through Babel) and Django's ``LANG_INFO``, never
from a list of our own.
"""

import re
import unicodedata
import zoneinfo
from collections.abc import Collection, Iterator
from functools import lru_cache

from babel import Locale, UnknownLocaleError
from babel.core import get_global, parse_locale
from babel.dates import get_timezone_location
from babel.localedata import locale_identifiers
from django.conf.locale import LANG_INFO
from pyuca import Collator

# CLDR's codes for "no language", "several", "undetermined" and "other": not a language a person reads.
_NOT_LANGUAGES = frozenset({"mis", "mul", "und", "zxx"})


@lru_cache(maxsize=1)
def time_zone_names() -> frozenset[str]:
    """Every IANA time zone a user may choose; "Factory" and "localtime" are tzdata artefacts, not places."""
    return frozenset(zoneinfo.available_timezones()) - {"Factory", "localtime"}


# The IANA areas that name places (``Asia/Riyadh``); the others are legacy (``US/Eastern``, ``W-SU``,
# ``CST6CDT``) or offsets (``Etc/GMT+1``, whose sign is the reverse of what it reads).
PLACE_AREAS = frozenset(
    {"Africa", "America", "Antarctica", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific"}
)


@lru_cache(maxsize=1)
def listed_time_zones() -> frozenset[str]:
    """The zones a person picks from: one per place, and UTC (``time_zone_names`` still accepts every other).

    tzdata keeps old names as links (``Asia/Calcutta`` → ``Asia/Kolkata``, ``America/Montreal`` →
    ``America/Toronto``), which a list showed as the same city two to four times; CLDR's zone aliases
    (through Babel) name each link's canonical zone. Legacy and offset names (``GMT+1``, ``W-SU``)
    are left out of the list too.
    """
    aliases = get_global("zone_aliases")
    places = {
        name
        for name in time_zone_names()
        if name.partition("/")[0] in PLACE_AREAS and "/" in name and name not in aliases
    }
    return frozenset(places | {"UTC"})


@lru_cache(maxsize=1)
def language_codes() -> frozenset[str]:
    """Every language a user may choose: the ISO 639-1 or 639-2/3 codes Django or CLDR knows, without a region.

    CLDR names about 650 languages (``ps``, ``dv``, ``arc`` among them) where Django has about 90.
    """
    cldr = (code for code in Locale("en").languages if code.isalpha() and code.islower())
    django = (code for code in LANG_INFO if "-" not in code)
    return frozenset({*cldr, *django}) - _NOT_LANGUAGES


def language_of(tag: str) -> str | None:
    """The language of a BCP 47 tag or a POSIX locale name, as stored: ``ar-SA``, ``fa_IR``, ``zh-Hant-TW``, ``AR``
    → ``ar``, ``fa``, ``zh``, ``ar`` (Babel's ``parse_locale``); None when it names no language ``is_language`` knows.

    Apps send their platform's locale (``ar-SA`` from a browser, ``fa_IR`` from Android); templates are per
    language, so the region and script are not kept, nor a BCP 47 extension (``ar-SA-u-nu-latn``, RFC 6067).
    Java's ``Locale`` still reports the ISO 639 codes withdrawn in 1989 (``iw_IL``, ``in_ID``, ``ji``): read
    as ``he``, ``id``, ``yi``.
    """
    base = _EXTENSION.split(tag.strip(), maxsplit=1)[0]
    try:
        language = parse_locale(base.replace("-", "_"))[0].lower()
    except ValueError:
        return None
    language = _WITHDRAWN.get(language, language)
    return language if is_language(language) else None


# A BCP 47 extension or private use from its singleton on ("-u-nu-latn", "-x-…"): RFC 5646 §2.2.6–7.
_EXTENSION = re.compile(r"[-_][0-9A-Za-z][-_]")
_WITHDRAWN = {"iw": "he", "in": "id", "ji": "yi"}


@lru_cache(maxsize=1)
def _collator() -> Collator:
    return Collator()  # reads the Default Unicode Collation Element Table once, about 0.2 s


def collation_key(text: str) -> tuple:
    """A sort key for ``text`` by the Unicode Collation Algorithm (UTS #10, its default table; pyuca).

    Code-point order (``sorted``, ``casefold``) put Persian's پ چ ژ گ after every letter of the Arabic
    block (کابل after یاکوتسک); here پ follows ب, چ follows ج and گ follows ک, Latin letters ignore case
    first, and Arabic, Persian and Latin lists each read as their readers expect.
    """
    return _collator().sort_key(text)


def is_language(code: str) -> bool:
    """An ISO 639 code Django or CLDR knows, without a region (``ar``, not ``ar-EG``)."""
    return code in language_codes()


@lru_cache(maxsize=1024)
def text_direction(language: str) -> str:
    """``"rtl"`` or ``"ltr"``: how ``language`` (``ps``, ``ckb``, ``ar-EG``, ``sd_Deva``) is written.

    Sources, in order: the language's CLDR locale data (Babel's ``Locale.text_direction``);
    for a language without locale data (``arc``, Aramaic), the direction of the script CLDR's
    likely subtags give it, taken from a locale that writes that script or else from the
    Unicode bidi class of that script's letters. Unknown or malformed codes are ``"ltr"``.
    """
    code = language.strip().replace("-", "_")
    try:
        return _direction_of(Locale.parse(code))
    except (ValueError, TypeError, UnknownLocaleError):
        pass
    script = _likely_script(code.split("_")[0].lower())
    return _script_direction(script) if script else "ltr"


def _direction_of(locale: Locale) -> str:
    return "rtl" if locale.text_direction == "rtl" else "ltr"


def _likely_script(language: str) -> str | None:
    """The script CLDR's likely subtags give a bare language (``arc`` → ``Armi``), or None."""
    likely = get_global("likely_subtags").get(language)
    parts = likely.split("_") if likely else []
    return parts[1] if len(parts) > 2 else None


@lru_cache(maxsize=64)
def _script_direction(script: str) -> str:
    """The direction of an ISO 15924 script: a CLDR locale written in it, else its letters' Unicode bidi class."""
    likely = get_global("likely_subtags")
    for identifier in locale_identifiers():
        if "_" not in identifier and likely.get(identifier, "").split("_")[1:2] == [script]:
            return _direction_of(Locale.parse(identifier))
    name = Locale("en").scripts.get(script, "").upper()
    return _letter_direction(f"{name} LETTER ") if name else "ltr"


def _letter_direction(prefix: str) -> str:
    """``"rtl"`` when the first Unicode character named ``prefix…`` is right-to-left (bidi class R or AL)."""
    for code_point in range(0x110000):
        if unicodedata.name(chr(code_point), "").startswith(prefix):
            return "rtl" if unicodedata.bidirectional(chr(code_point)) in ("R", "AL") else "ltr"
    return "ltr"


@lru_cache(maxsize=1)
def rtl_languages() -> tuple[str, ...]:
    """Every bare language CLDR has locale data for that is written right to left, sorted (about 25).

    A locale's direction is its script's: each bare language's likely script (CLDR's likely
    subtags) is judged once, reading one locale per script (about 40) rather than all 330.
    Django's system check iterates this at every process start.
    """
    bare = [code for code in locale_identifiers() if "_" not in code and code not in _NOT_LANGUAGES]
    scripts = {code: _likely_script(code) for code in bare}
    return tuple(sorted(code for code in bare if scripts[code] and _script_direction(scripts[code]) == "rtl"))


class RightToLeft(Collection):
    """``code in RightToLeft()`` for any language ``text_direction`` calls right to left.

    Django's ``settings.LANGUAGES_BIDI`` (a fixed list of six) decides ``get_language_bidi`` and
    so ``dir`` in every page that asks Django, the admin's included; with this as the setting
    they ask CLDR instead. Iterating (Django's system check does) lists ``rtl_languages()``.
    """

    def __contains__(self, code: object) -> bool:
        return isinstance(code, str) and text_direction(code) == "rtl"

    def __iter__(self) -> Iterator[str]:
        return iter(rtl_languages())

    def __len__(self) -> int:
        return len(rtl_languages())


@lru_cache(maxsize=16)
def time_zone_cities(language: str) -> dict[str, str]:
    """Each choosable zone's city as CLDR names it in ``language`` (``Asia/Riyadh`` → ``الرياض`` in ``ar``).

    CLDR's exemplar cities, through Babel; English for a language CLDR has no locale for, and the
    IANA name's last part for a zone CLDR does not name. About half a second per language, once.
    """
    try:
        locale = Locale.parse(language.replace("-", "_"))
    except (ValueError, TypeError, UnknownLocaleError):
        locale = Locale("en")
    return {name: _city(name, locale) for name in time_zone_names()}


def _city(name: str, locale: Locale) -> str:
    fallback = name.rpartition("/")[2].replace("_", " ")
    if "/" not in name or name.startswith("Etc/"):
        return fallback
    try:
        return get_timezone_location(name, locale=locale, return_city=True)
    except (LookupError, ValueError):
        return fallback


def english_name(code: str) -> str:
    """A language's English name (``ary`` → "Moroccan Arabic"): CLDR's, else Django's ``LANG_INFO``, else the code."""
    return Locale("en").languages.get(code) or LANG_INFO.get(code, {}).get("name") or code


def native_name(code: str) -> str:
    """A language's name in itself (``ps`` → ``پښتو``), from CLDR, else Django's ``LANG_INFO``, else the code."""
    try:
        name = Locale.parse(code.replace("-", "_")).get_display_name()
    except (ValueError, TypeError, UnknownLocaleError):
        name = None
    return name or LANG_INFO.get(code, {}).get("name_local") or code
