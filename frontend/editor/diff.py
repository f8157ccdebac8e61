"""A side-by-side diff of a draft against the version in use, line by line, with the changed words marked.

difflib (the standard library) pairs the lines; changed lines pair up and
difflib again marks the words that differ (a word: letters and digits in any
script, a run of spaces, or one other character), which reads better than
single letters. The result is plain data: the
template escapes every piece of text (nothing here is HTML), and each cell keeps
its template's language and direction so that Arabic reads right to left.
"""

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import zip_longest

from backend.notifications.models import TemplateVersion
from backend.notifications.models.recipient import text_direction
from frontend.editor.forms import CHANNEL_PARTS

# Lines longer than this (characters) are marked whole: a word diff is quadratic in the worst case.
MAX_MARKED_LINE = 2000
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")
_LABELS = {"subject": "Subject", "text_body": "Text", "html_body": "HTML body"}


@dataclass(frozen=True)
class Piece:
    """A run of a line's text; ``changed`` when it differs from the other side."""

    text: str
    changed: bool = False


@dataclass(frozen=True)
class Cell:
    """One side of a row: the line's number (1-based) and its text in pieces."""

    number: int
    pieces: tuple[Piece, ...]


@dataclass(frozen=True)
class Row:
    """One row of the diff: ``tag`` is difflib's equal / replace / delete / insert; a side is None when absent."""

    tag: str
    old: Cell | None
    new: Cell | None


@dataclass(frozen=True)
class PartDiff:
    """The diff of one part (subject, text, HTML body); ``direction`` is how its cells read."""

    name: str
    label: str
    direction: str
    rows: tuple[Row, ...]

    @property
    def changed(self) -> bool:
        return any(row.tag != "equal" for row in self.rows)


def side_by_side(old: str, new: str) -> tuple[Row, ...]:
    """The rows of ``old`` against ``new``, line by line; replaced lines are paired and their changes marked."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            rows += [
                Row(tag, _cell(i + 1, old_lines[i]), _cell(j + 1, new_lines[j]))
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            ]
            continue
        for i, j in zip_longest(range(i1, i2), range(j1, j2)):
            rows.append(_changed_row(old_lines, new_lines, i, j))
    return tuple(rows)


def _cell(number: int, text: str, changed: bool = False) -> Cell:
    return Cell(number, (Piece(text, changed),))


def _changed_row(old_lines: list[str], new_lines: list[str], i: int | None, j: int | None) -> Row:
    if i is None:
        return Row("insert", None, _cell(j + 1, new_lines[j], True))
    if j is None:
        return Row("delete", _cell(i + 1, old_lines[i], True), None)
    old, new = _marked(old_lines[i], new_lines[j])
    return Row("replace", Cell(i + 1, old), Cell(j + 1, new))


def _marked(old: str, new: str) -> tuple[tuple[Piece, ...], tuple[Piece, ...]]:
    """Both lines in pieces, the words that differ marked ``changed``."""
    if max(len(old), len(new)) > MAX_MARKED_LINE:
        return (Piece(old, True),), (Piece(new, True),)
    old_words, new_words = _WORDS.findall(old), _WORDS.findall(new)
    old_pieces: list[Piece] = []
    new_pieces: list[Piece] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old_words, new_words, autojunk=False).get_opcodes():
        _add(old_pieces, "".join(old_words[i1:i2]), tag != "equal")
        _add(new_pieces, "".join(new_words[j1:j2]), tag != "equal")
    return _bridged(old_pieces), _bridged(new_pieces)


def _bridged(pieces: list[Piece]) -> tuple[Piece, ...]:
    """The pieces with only spaces kept between two changes marked too: "<del>has shipped</del>", not two marks."""
    out: list[Piece] = []
    for piece in pieces:
        if len(out) >= 2 and piece.changed and out[-2].changed and not out[-1].text.strip():
            gap = out.pop()
            out[-1] = Piece(out[-1].text + gap.text + piece.text, True)
        else:
            out.append(piece)
    return tuple(out)


def _add(pieces: list[Piece], text: str, changed: bool) -> None:
    """Append ``text``, joined to the last piece when both are (un)changed alike."""
    if not text:
        return
    if pieces and pieces[-1].changed == changed:
        pieces[-1] = Piece(pieces[-1].text + text, changed)
    else:
        pieces.append(Piece(text, changed))


def compare(live: TemplateVersion | None, draft: TemplateVersion) -> list[PartDiff]:
    """Each part ``draft``'s channel uses, against ``live`` (None: nothing is in use, every line is new).

    The HTML source reads left to right like code (as in the editor); subject and text follow the language.
    """
    direction = text_direction(draft.language)
    parts = []
    for name in CHANNEL_PARTS[draft.channel]:
        old = getattr(live, name) if live is not None else ""
        parts.append(
            PartDiff(
                name,
                _LABELS[name],
                "ltr" if name == "html_body" else direction,
                side_by_side(old, getattr(draft, name)),
            )
        )
    return parts
