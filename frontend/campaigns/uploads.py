"""An upload between its report and its save: the ids kept in files under ``NOTIFY_DATA_DIR``.

The report page names a token; saving reads the known ids back from
``<DATA_DIR>/segment-uploads/<staff user id>-<token>.known`` (one id a line,
file order), so the CSV is not uploaded twice and nothing of an unsaved upload
is in the database: it shows in no list and no count. ``.unknown`` holds the
ids without a recipient, for the CSV download. A token is 32 URL-safe
characters and belongs to the staff user who uploaded; a file of another user,
or one older than ``MAX_AGE``, is not found. A save first claims the known ids
by renaming their file, so a double click or two tabs make one segment, not two.
Old files are removed at each new upload; a save removes its own.
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


def unknown_ids(user_id: int, token: str) -> Iterator[str] | None:
    """The unknown ids of a pending upload, read lazily; None when there is no such upload."""
    path = _existing(user_id, token, "unknown")
    if path is None:
        return None
    return read(path)


def claim(user_id: int, token: str) -> Path | None:
    """Take a pending upload's known ids for saving (an atomic rename); None when gone or claimed already."""
    path = _existing(user_id, token, "known")
    if path is None:
        return None
    claimed = path.with_suffix(f".saving-{secrets.token_hex(8)}")
    try:
        path.rename(claimed)
    except FileNotFoundError:
        return None  # another request claimed it first
    return claimed


def read(path: Path) -> Iterator[str]:
    """The ids in a file written by ``keep`` (one a line), lazily."""
    with open(path, encoding="utf-8", newline="\n") as lines:
        for line in lines:
            yield line.removesuffix("\n")


def forget(user_id: int, token: str, claimed: Path) -> None:
    """Remove a saved upload's files."""
    claimed.unlink(missing_ok=True)
    _path(user_id, token, "unknown").unlink(missing_ok=True)


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
