"""An upload between its report and its save: the ids kept in files under ``NOTIFY_DATA_DIR``.

The report page names a token; saving reads the known ids back from
``<DATA_DIR>/segment-uploads/<staff user id>-<token>.known`` (one id a line,
file order), so the CSV is not uploaded twice and nothing of an unsaved upload
is in the database: it shows in no list and no count. ``.unknown`` holds the
ids without a recipient, for the CSV download. A token is 32 URL-safe
characters and belongs to the staff user who uploaded; a file of another user,
or one older than ``MAX_AGE``, is not found. Old files are removed at each new
upload; a save removes its own.
"""

import re
import secrets
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from django.conf import settings

MAX_AGE = 24 * 3600  # seconds
_TOKEN = re.compile(r"[A-Za-z0-9_-]{32}")


def folder() -> Path:
    """Where pending uploads are kept (made on first use)."""
    path = Path(settings.DATA_DIR) / "segment-uploads"
    path.mkdir(parents=True, exist_ok=True)
    return path


def keep(user_id: int, known: Iterable[str], unknown: Iterable[str]) -> str:
    """Write the ids of one upload for ``user_id``; returns its token."""
    _remove_old()
    token = secrets.token_urlsafe(24)
    for suffix, ids in (("known", known), ("unknown", unknown)):
        with open(_path(user_id, token, suffix), "w", encoding="utf-8", newline="\n") as out:
            out.writelines(f"{user_id_}\n" for user_id_ in ids)
    return token


def exists(user_id: int, token: str) -> bool:
    """Whether ``token`` names a pending upload of ``user_id``."""
    return _existing(user_id, token, "known") is not None


def ids(user_id: int, token: str, suffix: str) -> Iterator[str] | None:
    """The ``known`` or ``unknown`` ids of a pending upload, read lazily; None when there is no such upload."""
    path = _existing(user_id, token, suffix)
    if path is None:
        return None
    return _read(path)


def forget(user_id: int, token: str) -> None:
    """Remove a pending upload's files (after its save)."""
    for suffix in ("known", "unknown"):
        _path(user_id, token, suffix).unlink(missing_ok=True)


def _read(path: Path) -> Iterator[str]:
    with open(path, encoding="utf-8", newline="\n") as lines:
        for line in lines:
            yield line.removesuffix("\n")


def _existing(user_id: int, token: str, suffix: str) -> Path | None:
    if not _TOKEN.fullmatch(token):
        return None
    path = _path(user_id, token, suffix)
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    return path if age <= MAX_AGE else None


def _path(user_id: int, token: str, suffix: str) -> Path:
    return folder() / f"{user_id}-{token}.{suffix}"


def _remove_old() -> None:
    cutoff = time.time() - MAX_AGE
    for path in folder().iterdir():
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink(missing_ok=True)
        except FileNotFoundError:
            continue  # removed by another process meanwhile
