"""Strict readers for settings taken from environment variables.

Every reader refuses values it does not understand instead of guessing, so a
typo in a deployment fails at start-up rather than silently running with a
default. Secrets may also be read from ``NAME_FILE`` (Docker / systemd
credentials), which wins over ``NAME``.
"""

import os
from pathlib import Path

_TRUE = {"1", "true", "on"}
_FALSE = {"0", "false", "off", ""}


class EnvError(ValueError):
    """An environment variable holds a value its reader cannot accept."""


def env_str(name: str, default: str = "") -> str:
    """Return ``$NAME`` (or the contents of the file named by ``$NAME_FILE``)."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
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


def env_int(name: str, default: int, minimum: int | None = None) -> int:
    """Return ``$NAME`` as an int, refusing non-integers and values below ``minimum``."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise EnvError(f"{name}={raw!r}: expected an integer") from None
    if minimum is not None and value < minimum:
        raise EnvError(f"{name}={value}: must be at least {minimum}")
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
