"""Strict readers for settings taken from environment variables.

Every reader refuses values it does not understand instead of guessing, so a
typo in a deployment fails at start-up rather than silently running with a
default. Secrets may also be read from ``NAME_FILE`` (Docker / systemd
credentials), which wins over ``NAME``.
"""

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dj_database_url

_TRUE = {"1", "true", "on"}
_FALSE = {"0", "false", "off", ""}


class EnvError(ValueError):
    """An environment variable holds a value its reader cannot accept."""


@contextmanager
def exit_on_configuration_error() -> Iterator[None]:
    """Around loading the settings: an ``EnvError`` ends the process with one line and status 2, not a traceback.

    For the entry points an operator starts (``manage.py``, the web and WebSocket servers' modules):
    the line names the variable and what it expected, which is all there is to fix.
    """
    try:
        yield
    except EnvError as exc:
        sys.stderr.write(f"Configuration error: {exc}\n")
        raise SystemExit(2) from None


def env_str(name: str, default: str = "") -> str:
    """Return ``$NAME`` (or the contents of the file named by ``$NAME_FILE``, stripped).

    Raises ``EnvError`` when ``$NAME_FILE`` names a file that cannot be read or holds nothing: a
    secret mounted wrong must stop start-up, not turn into "unset" (``NOTIFY_METRICS_TOKEN`` would
    quietly go from a token to loopback only).
    """
    path = os.environ.get(f"{name}_FILE")
    if path:
        try:
            value = Path(path).read_text().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise EnvError(f"{name}_FILE={path}: {getattr(exc, 'strerror', None) or exc}") from None
        if not value:
            raise EnvError(f"{name}_FILE={path}: the file is empty")
        return value
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    """Return ``$NAME`` as a bool; only 1/0, true/false, on/off are accepted."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise EnvError(f"{name}={raw!r}: expected one of 1/0, true/false, on/off")


def env_int(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    """Return ``$NAME`` as an int, refusing non-integers and values below ``minimum`` or above ``maximum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r}: expected an integer") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value}: must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise EnvError(f"{name}={value}: must be at most {maximum}")
    return value


def env_float(name: str, default: float, minimum: float | None = None) -> float:
    """Return ``$NAME`` as a float, refusing non-numbers and values below ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r}: expected a number") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value}: must be at least {minimum}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    """Return ``$NAME`` split on commas, blanks dropped."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_rate_limits(name: str, default: str) -> dict[str, dict[str, int]]:
    """``$NAME`` like ``marketing=3/h,10/d;transactional=30/h,200/d`` as ``{"marketing": {"h": 3, "d": 10}, …}``.

    Units: ``h`` per hour, ``d`` per day. A category left out has no limit.
    """
    raw = os.environ.get(name, default)
    limits: dict[str, dict[str, int]] = {}
    for part in filter(None, (p.strip() for p in raw.split(";"))):
        category, _, spec = part.partition("=")
        per: dict[str, int] = {}
        for item in filter(None, (i.strip() for i in spec.split(","))):
            count, _, unit = item.partition("/")
            if unit not in ("h", "d") or not count.isdigit():
                raise EnvError(f"{name}: {item!r} in {part!r}: expected COUNT/h or COUNT/d")
            per[unit] = int(count)
        if not category.strip() or not per:
            raise EnvError(f"{name}: {part!r}: expected category=COUNT/h,COUNT/d")
        limits[category.strip()] = per
    return limits


def env_web_url(name: str, default: str = "") -> str:
    """Return ``$NAME`` as an absolute http(s) URL with a host and no credentials, or "" when unset.

    For URLs that pages put in front of people (a logo): ``javascript:``, ``data:`` or a relative
    path is refused at start-up, not shown.
    """
    raw = os.environ.get(name, default).strip()
    if not raw:
        return ""
    try:
        parts = urlsplit(raw)
        host = parts.hostname
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host or parts.username or parts.password:
        raise EnvError(f"{name}={raw!r}: expected an absolute http:// or https:// URL without user or password")
    return raw


# The databases the product runs on: PostgreSQL in production, SQLite for the embedded demo.
_DATABASE_SCHEMES = {"postgres", "postgresql", "sqlite"}


def env_database(name: str, default: str, conn_max_age: int = 0) -> dict:
    """``$NAME`` (or the file ``$NAME_FILE`` names) as a Django ``DATABASES`` entry; ``default`` when unset.

    Accepts ``postgres://user:password@host:5432/name`` (``postgres:///name``: the local socket) and
    ``sqlite:///path``. Raises ``EnvError`` for an empty value, another scheme, a URL dj-database-url
    cannot read, a PostgreSQL URL without ``//`` or with a database name holding ``/``, ``@`` or ``:``
    (a mistyped URL whose password would end up in the name, which the server's errors quote),
    ``connect_timeout`` that is not a whole number of seconds, and a SQLite URL naming no file (an
    in-memory database is each process's own). Set but empty (an env file's ``DATABASE_URL=``) is
    refused rather than read as unset, which would run a deployment on a local SQLite file. The
    messages never quote the URL, which holds the password.
    """
    url = env_str(name, default).strip()
    expected = "expected postgres://user:password@host:5432/name or sqlite:///path (unset: the embedded SQLite file)"
    try:
        problem = _database_url_problem(url)
        if problem is None:
            return dj_database_url.parse(url, conn_max_age=conn_max_age)
    except ValueError as exc:
        problem = f"cannot be read ({exc})"
    raise EnvError(f"{name} {problem}; {expected}")


def _database_url_problem(url: str) -> str | None:
    """What is wrong with the database URL ``url`` (never quoting it), or None; ``ValueError`` if unreadable."""
    if not url:
        return "is set but empty"
    parts = urlsplit(url)
    if parts.scheme not in _DATABASE_SCHEMES:
        return f"has the scheme {parts.scheme!r}, not a supported database's" if parts.scheme else "has no scheme"
    if not url[len(parts.scheme) + 1 :].startswith("//"):
        return f"has no // after {parts.scheme}:"
    if parts.scheme == "sqlite":
        file = url[len("sqlite://") :]
        if parts.netloc or file in ("", "/", "/:memory:"):
            return "names no database file after sqlite:/// (an in-memory database would be each process's own)"
        return None
    database = parts.path.removeprefix("/")
    if not database or any(mark in database for mark in "/@:"):
        return "has no database name after the host, or one holding / @ or :"
    timeouts = parse_qs(parts.query).get("connect_timeout", [])
    if any(not value.isdigit() for value in timeouts):
        return "has a connect_timeout that is not a whole number of seconds"
    return None


def env_region(name: str, default: str) -> str:
    """``$NAME`` as an upper-case region code that phonenumbers has a numbering plan for (``SA``, ``US``, ``GB``)."""
    import phonenumbers

    raw = os.environ.get(name, default)
    region = raw.strip().upper()
    if region not in phonenumbers.SUPPORTED_REGIONS:
        raise EnvError(f"{name}={raw!r}: expected a region code such as SA, US or GB")
    return region
