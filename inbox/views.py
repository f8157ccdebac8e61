"""The demo end user's inbox page: HTMX for the actions, the widget's socket for live changes.

Every view starts from ``_person(link)``, which checks the signed link and
returns the recipient; pages render in the recipient's language (``dir="rtl"``
for every language CLDR writes right to left) and time zone. Live updates come from ``widget.js``: on any
inbox event it fires ``inboxchanged`` on ``<body>``, and the list re-renders
itself from ``messages`` (one template renders a message, server side).
``?show=unread`` / ``archived`` filter the list (default: every message not archived).
Times are rendered as a date and time in the person's language and time zone, and
``page.js`` rewrites them as the widget shows them ("3 minutes ago", ``Intl.RelativeTimeFormat``).
"""

from contextlib import contextmanager

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone, translation
from django.views.decorators.http import require_GET, require_POST

from backend.notifications import links
from backend.notifications.models import Recipient
from frontend.signed_pages import link_error
from inbox import actions, queries, tokens


def _person(link: str) -> Recipient:
    try:
        user_id = tokens.user_for_link(link)
    except tokens.ExpiredToken:
        raise Http404("This inbox link has expired.") from None
    except tokens.InvalidToken:
        raise Http404("Not an inbox link.") from None
    recipient = Recipient.objects.filter(user_id=user_id).first()
    if recipient is None or links.issued_before(link, recipient.created_at):  # erased, maybe made again since
        raise Http404("No such user.")
    return recipient


@contextmanager
def _as(recipient: Recipient):
    """Render in the person's language and time zone."""
    with translation.override(recipient.language), timezone.override(recipient.time_zone):
        yield


def _show(request) -> str:
    """The filter the request asks for; anything else is the default, every message not archived."""
    show = request.GET.get("show", "")
    return show if show in queries.FILTERS else "all"


def _list_context(link: str, recipient: Recipient, show: str) -> dict:
    return {
        "link": link,
        "show": show,
        "messages": queries.shown(recipient.pk, show),  # newest first on screen
        "unread": queries.unread_count(recipient.pk),
        "last_id": queries.last_id(recipient.pk),
    }


def _render(request, template: str, recipient: Recipient, context: dict) -> HttpResponse:
    with _as(recipient):
        response = render(request, template, {"recipient": recipient, **context})
    response["Content-Language"] = recipient.language
    return response


def _link_error_page(request, link: str) -> HttpResponse | None:
    """The clear 400 (not valid) / 410 (expired) page a person gets for a bad link, as the preference center does."""
    try:
        tokens.user_for_link(link)
    except tokens.ExpiredToken:
        return link_error(request, link, expired=True)
    except tokens.InvalidToken:
        return link_error(request, link, expired=False)
    return None


@require_GET
def page(request, link: str):
    problem = _link_error_page(request, link)
    if problem is not None:
        return problem
    recipient = _person(link)
    context = _list_context(link, recipient, _show(request))
    context["token"] = tokens.issue(recipient.user_id).value
    return _render(request, "inbox/page.html", recipient, context)


@require_GET
def messages(request, link: str):
    """The list alone, for ``hx-get`` when the socket says something changed."""
    recipient = _person(link)
    return _render(request, "inbox/_list.html", recipient, _list_context(link, recipient, _show(request)))


def _after_change(request, link: str, recipient: Recipient, message) -> HttpResponse:
    if not request.htmx:
        return redirect("inbox:page", link=link)
    if message is None or message.archived_at is not None:
        return HttpResponse("")  # hx-swap="outerHTML" removes the row
    return _render(request, "inbox/_message.html", recipient, {"link": link, "m": message})


def _change(request, link: str, message_id: int, action) -> HttpResponse:
    recipient = _person(link)
    try:
        message, _ = action(recipient.user_id, message_id)
    except actions.MessageNotFound:
        raise Http404("No such message.") from None
    return _after_change(request, link, recipient, message)


@require_POST
def read(request, link: str, message_id: int):
    return _change(request, link, message_id, actions.mark_read)


@require_POST
def archive(request, link: str, message_id: int):
    return _change(request, link, message_id, actions.archive)


@require_POST
def read_all(request, link: str):
    recipient = _person(link)
    through = request.POST.get("through", "")
    # isascii: "²" is a digit to str.isdigit but not to int() (a 500).
    actions.mark_all_read(recipient.user_id, int(through) if through.isascii() and through.isdigit() else None)
    if not request.htmx:
        return redirect("inbox:page", link=link)
    return _render(request, "inbox/_list.html", recipient, _list_context(link, recipient, _show(request)))


@require_POST
def token(request, link: str):
    """A fresh socket token for the widget when the page's one expired (CSRF-protected)."""
    issued = tokens.issue(_person(link).user_id)
    return JsonResponse({"token": issued.value, "expires_in": issued.expires_in})


@require_GET
def embed(request, link: str):
    """A stand-in for a company's own page, embedding the widget the way README shows."""
    recipient = _person(link)
    return _render(
        request, "inbox/embed.html", recipient, {"link": link, "token": tokens.issue(recipient.user_id).value}
    )
