"""The visible unsubscribe footer of commercial email, added by the platform to both parts.

Commercial email must carry, in its body, a visible way to unsubscribe (CAN-SPAM 15 U.S.C.
§7704(a)(5), the ePrivacy rules in the EU) besides the ``List-Unsubscribe`` headers: a link that
turns the kind off (the one-click page, ``links.unsubscribe_url``) and one to the preference
center (``links.preference_url``). Authors do not write it and cannot leave it out. It is
written in the message's language and direction when the platform has the footer in that
language, else in English, left to right. A digest that holds marketing items carries it too,
with one unsubscribe link per marketing kind it holds.
"""

from dataclasses import dataclass, replace
from html import escape

from django.utils import translation
from django.utils.translation import gettext as _

from backend.notifications import links
from backend.notifications.bidi import isolate_text
from backend.notifications.locales import text_direction
from backend.notifications.models import Category, Kind, Notification, Recipient
from backend.notifications.rendering import Rendered


@dataclass(frozen=True)
class FooterLink:
    """One link of the footer: what it says and where it goes."""

    label: str
    url: str


@dataclass(frozen=True)
class Footer:
    """The footer's words and links in ``language`` (written ``direction``)."""

    language: str
    direction: str
    reason: str
    links: tuple[FooterLink, ...]

    @property
    def text(self) -> str:
        """The plain-text part's footer: after a signature separator ("-- "), one line per link.

        In a right-to-left footer each URL sits between U+2068 and U+2069, as inserted values do (``bidi``).
        """
        lines = [self.reason, *(f"{link.label}: {isolate_text(link.url, self.direction)}" for link in self.links)]
        return "\n\n-- \n" + "\n".join(lines) + "\n"

    @property
    def html(self) -> str:
        """A table of its own with ``dir`` on every block (Outlook ignores ``<html dir>`` inside tables)."""
        d, lang = self.direction, self.language
        align = "right" if d == "rtl" else "left"
        anchors = " · ".join(f'<a href="{escape(link.url)}">{escape(link.label)}</a>' for link in self.links)
        return (
            f'<table role="presentation" width="100%" dir="{d}" lang="{lang}" style="margin-top:24px;'
            f'border-top:1px solid #dde2ea;font-size:12px;color:#5b6472;text-align:{align}">'
            f'<tr dir="{d}"><td dir="{d}" style="padding-top:12px">'
            f'<p dir="{d}" style="margin:0 0 8px">{escape(self.reason)}</p>'
            f'<p dir="{d}" style="margin:0">{anchors}</p></td></tr></table>'
        )


def marketing_kinds(notification: Notification) -> list[Kind]:
    """The marketing kinds a mail is about: its own kind, or the marketing items a digest holds (by name)."""
    if notification.kind.category == Category.MARKETING:
        return [notification.kind]
    if notification.kind.name != Kind.DIGEST:
        return []  # only a digest holds other notifications: no query for each transactional mail a worker sends
    held = Notification.objects.filter(digest=notification).values("kind")
    return list(Kind.objects.filter(category=Category.MARKETING, pk__in=held).order_by("name"))


def _footer_language(language: str) -> str:
    """``language`` when the footer is translated into it, else English."""
    with translation.override(language):
        translated = _("Notification settings") != "Notification settings"
    return language if translated or language.split("-")[0] == "en" else "en"


# Where a template test's footer links go: nowhere, as each recipient's own links are made for them.
SAMPLE_URL = "https://example.invalid/each-recipient-gets-their-own-link"


def footer(recipient: Recipient | None, kinds: list[Kind], language: str) -> Footer:
    """The footer for ``recipient`` about ``kinds`` (at least one), in ``language`` where it can be.

    Without a recipient (a template test sent to its editor) the links are ``SAMPLE_URL``: the words,
    language and direction are what recipients get, and no recipient's link is made or given away.
    """
    language = _footer_language(language)

    def unsubscribe_url(kind: Kind) -> str:
        return links.unsubscribe_url(recipient.user_id, kind.name) if recipient is not None else SAMPLE_URL

    with translation.override(language):
        unsubscribe = tuple(
            FooterLink(
                _("Unsubscribe from “%(kind)s”") % {"kind": _(kind.description) if kind.description else kind.name},
                unsubscribe_url(kind),
            )
            for kind in kinds
        )
        preferences = links.preference_url(recipient.user_id) if recipient is not None else SAMPLE_URL
        settings_link = FooterLink(_("Notification settings"), preferences)
        reason = _("You get this email because your notification settings allow it.")
    return Footer(language, text_direction(language), reason, (*unsubscribe, settings_link))


def with_footer(rendered: Rendered, recipient: Recipient | None, kinds: list[Kind], language: str) -> Rendered:
    """``rendered`` with the footer (``footer``: None for a template test) at the end of the text and HTML body."""
    found = footer(recipient, kinds, language)
    html = rendered.html.replace("\n</body>", f"\n{found.html}\n</body>", 1) if rendered.html else ""
    return replace(rendered, text=rendered.text.rstrip("\n") + found.text, html=html)
