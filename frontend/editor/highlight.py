"""The author's text again, with every character that forces UCS-2 marked where it stands.

Built here rather than in a template loop: text pasted from a word processor
carries hundreds of marks, and a Django template loop over them (a ``{% url %}``
and a dozen lookups per mark) took 30 ms of the 50 ms the live pricing round
trip may cost. Every piece of text goes through ``escape``; nothing of the
author's reaches the page unescaped.
"""

from functools import lru_cache

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from frontend.editor.preview import Run


@lru_cache(maxsize=512)
def _fix_button(char: str, label: str, title: str, fix_url: str) -> str:
    """The mark of one fixable character, without its position (that goes in ``value``)."""
    return (
        f'<button type="submit" class="tpl-mark tpl-mark--fix" name="fix" value="{{value}}" '
        f'formaction="{escape(fix_url)}" hx-post="{escape(fix_url)}" hx-target="#tpl-preview" '
        f'title="{escape(title)}">{escape(label)}</button>'
    )


@lru_cache(maxsize=512)
def _fix_mark(label: str, title: str) -> str:
    return f'<mark class="tpl-mark tpl-mark--fix" title="{escape(title)}">{escape(label)}</mark>'


def _piece(run: Run, fix_url: str, can_edit: bool) -> str:
    if run.kind == "text":
        return escape(run.text)
    if run.kind == "nofix":
        return f'<mark class="tpl-mark tpl-mark--nofix" title="{escape(run.title)}">{escape(run.text)}</mark>'
    if can_edit:
        return _fix_button(run.text, run.label, run.title, fix_url).replace("{value}", escape(run.fix_value))
    return _fix_mark(run.label, run.title)


def mirror_html(runs: tuple[Run, ...], fix_url: str, can_edit: bool) -> SafeString:
    """The marked copy: a button per fixable character for editors, a plain mark for everyone else."""
    return mark_safe("".join(_piece(run, fix_url, can_edit) for run in runs))  # every piece is escaped in _piece
