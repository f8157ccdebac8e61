"""Pages people reach by a signed link instead of a login: the preference center and unsubscribe.

``for_person(resolve)`` wraps such a view: it turns the token into the
recipient, answers a tampered link 400 and an expired one 410 with a page
that says which (in the person's language when the link still names them,
else the browser's, from Accept-Language), and renders the view in the person's language and time zone.
The link is the only credential, so its pages are never cached and never
send it to another site in a Referer.
"""

from collections.abc import Callable
from contextlib import suppress
from functools import wraps

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.utils.translation import gettext as _

from backend.notifications import links
from backend.notifications.locales import text_direction
from backend.notifications.models import Recipient


def render_page(request: HttpRequest, template: str, context: dict, status: int = 200) -> HttpResponse:
    """Render in the active language, with ``lang``/``dir`` for ``<html>`` and the headers these pages need."""
    language = translation.get_language()
    response = render(request, template, {"lang": language, "dir": text_direction(language), **context}, status=status)
    response["Content-Language"] = language
    # Not "no-referrer": Chromium then sends "Origin: null" and Django's CSRF check refuses every POST.
    response["Referrer-Policy"] = "same-origin"
    return response


def status_message(request: HttpRequest, text: str, status: int, ok: bool = False) -> HttpResponse:
    """The status partial that lands in a live region next to the control that was changed."""
    return render_page(request, "frontend/preferences/_status.html", {"ok": ok, "message": text}, status=status)


def _language_of_expired(token: str) -> str | None:
    user_id = links.user_of_expired(token)
    return Recipient.objects.filter(user_id=user_id).values_list("language", flat=True).first() if user_id else None


def error_language(request: HttpRequest, token: str, expired: bool) -> str:
    """The language of a link-error page: the link owner's (an expired link still names them), else the browser's.

    Only a language the pages are translated into (``settings.LANGUAGES``); the browser's comes from
    ``Accept-Language`` (``get_language_from_request``), English when it names none of them.
    """
    owner = _language_of_expired(token) if expired else None
    if owner:
        with suppress(LookupError):
            return translation.get_supported_language_variant(owner)
    return translation.get_language_from_request(request)


def link_error(request: HttpRequest, token: str, expired: bool, status: int | None = None) -> HttpResponse:
    """400 "not valid" or 410 "expired", as a page or, for HTMX, as the status partial, in ``error_language``."""
    status = status or (410 if expired else 400)
    with translation.override(error_language(request, token, expired)):
        if expired:
            title = _("This link has expired")
            text = _(
                "For your security, links to your notification settings work for a limited time. "
                "Ask for a new link from the app or the website, or use the link in our latest email."
            )
        else:
            title = _("This link is not valid")
            text = _(
                "It may have been copied incompletely or changed. "
                "Open it again from the message you received, or ask for a new link."
            )
        if request.htmx:
            response = status_message(request, f"{title}. {text}", status)
        else:
            response = render_page(request, "frontend/link_error.html", {"title": title, "text": text}, status=status)
    patch_vary_headers(response, ["Accept-Language"])
    return response


def _as_person(request: HttpRequest, token: str, resolve: Callable[[str], str], view, *args, **kwargs) -> HttpResponse:
    try:
        user_id = resolve(token)
    except links.LinkError as exc:
        return link_error(request, token, exc.expired)
    recipient = Recipient.objects.filter(user_id=user_id).first()
    if recipient is None or links.issued_before(token, recipient.created_at):
        # A genuine link of someone since erased, or of an earlier record of a user id made again since.
        return link_error(request, token, expired=False, status=404)
    with translation.override(recipient.language), timezone.override(recipient.time_zone):
        return view(request, recipient, token, *args, **kwargs)


# What a plain-text mail client may take into a link along with the URL: the isolates around a footer's URL in
# right-to-left mail (``email_footer``, U+2068 … U+2069) or a direction mark. A token never holds one.
_MARKS = "\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def for_person(resolve: Callable[[str], str]):
    """Decorate ``view(request, recipient, token, …)``; ``resolve`` maps the token to a user id or raises LinkError.

    A token with direction marks at either end (a mail client linked them with the URL) is the token without
    them: a GET is redirected to its clean address, so the page's own links and forms carry no mark.
    """

    def decorator(view):
        @wraps(view)
        def wrapper(request: HttpRequest, token: str, *args, **kwargs) -> HttpResponse:
            clean = token.strip(_MARKS)
            if clean != token and request.method == "GET":
                # By the route's name, not by editing the path: the address is ours whatever the request said.
                match = request.resolver_match
                url = reverse(match.view_name, args=match.args, kwargs={**match.kwargs, "token": clean})
                query = request.META.get("QUERY_STRING", "")
                return redirect(url + (f"?{query}" if query else ""))
            response = _as_person(request, clean, resolve, view, *args, **kwargs)
            # A partial for HTMX, a page or a redirect otherwise; and never a copy of the person's settings in a cache.
            patch_vary_headers(response, ["HX-Request"])
            add_never_cache_headers(response)
            return response

        return wrapper

    return decorator
