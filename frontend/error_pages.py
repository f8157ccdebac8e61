"""403, 404, 405 and 500 as pages in the product's look, in the visitor's language and direction.

The language is the one ``LocaleMiddleware`` chose for the request (the language cookie, else the
browser's ``Accept-Language``), so a support agent whose browser asks for Arabic reads Arabic,
right to left, though the staff pages themselves are English (``staff_language.py``). Each page
says what happened and where to go: staff to the start page, people on a signed-link page
(preferences, unsubscribe, inbox) back to the message that brought them. Paths
under ``/api/`` keep the API's JSON errors (``api/errors.py``). Django answers a wrong method with
an empty 405 (``require_POST``), not through a handler: ``MethodNotAllowedPageMiddleware`` gives
it its page. ``/favicon.ico`` is served here too, because browsers ask for it on every site.
"""

import logging
import sys
from collections.abc import Callable
from pathlib import Path

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext_lazy as _
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

from backend.notifications.api.errors import DATABASE_UNAVAILABLE, api_not_found, json_server_error
from backend.notifications.models.recipient import text_direction

logger = logging.getLogger(__name__)

# Pages people reach by a signed link, without a login: "where to go" is the message they came from.
PERSON_PATHS = ("/preferences/", "/unsubscribe/", "/inbox/")
FAVICON = Path(__file__).resolve().parent / "static" / "frontend" / "favicon.ico"

PAGES = {
    403: (
        _("You don't have access to this page"),
        _(
            "Your role does not include this page. If you need it for your work, "
            "ask an administrator to give you access."
        ),
    ),
    404: (
        _("Page not found"),
        _("There is no page at this address. It may have been mistyped, or the page has moved."),
    ),
    405: (
        _("This page can't be opened this way"),
        _(
            "This address is used by a button on another page; opening it directly does nothing. "
            "Go back and use the button."
        ),
    ),
    500: (
        _("Something went wrong on our side"),
        _("We have recorded the error. Please try again in a few minutes."),
    ),
}


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def error_page(request: HttpRequest, status: int) -> HttpResponse:
    """The page for ``status`` (403, 404, 405 or 500) in the active language, with ``lang``/``dir`` on ``<html>``."""
    title, text = PAGES[status]
    # The staff pages themselves are English (staff_language.py); their error pages are translated.
    language = getattr(request, "visitor_language", None) or translation.get_language()
    person = request.path.startswith(PERSON_PATHS)
    context = {
        "lang": language,
        "dir": text_direction(language),
        "status": status,
        "title": title,
        "text": text,
        "person": person,
        "home_url": None if person else reverse("frontend:home"),
    }
    with translation.override(language):
        response = render(request, "frontend/error.html", context, status=status)
    response["Content-Language"] = language
    return response


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: JSON under /api/, the page elsewhere."""
    if is_api(request):
        return JsonResponse({"error": "forbidden", "message": "You do not have permission to do this."}, status=403)
    return error_page(request, 403)


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON under /api/, the page elsewhere."""
    return api_not_found(request) if is_api(request) else error_page(request, 404)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/ and the 503 page for a database outage (``api/errors.py``), the page elsewhere.

    A page that fails to render (its template, a context processor) falls back to one line of text.
    """
    if is_api(request) or isinstance(sys.exc_info()[1], DATABASE_UNAVAILABLE):
        return json_server_error(request)
    try:
        return error_page(request, 500)
    except Exception:
        logger.exception("the 500 page failed to render")
        return HttpResponse("Server error. Please try again later.", status=500, content_type="text/plain")


class MethodNotAllowedPageMiddleware:
    """Gives Django's empty 405 (``require_GET`` / ``require_POST``) its page; the API's 405s are DRF's JSON already."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or response.content or is_api(request):
            return response
        styled = error_page(request, 405)
        styled["Allow"] = response.get("Allow", "")
        return styled


@require_safe
@cache_control(public=True, max_age=86400)
def favicon(request: HttpRequest) -> HttpResponse:
    """``/favicon.ico``: the bell of ``favicon.svg`` as a 16/32/48 px icon, for browsers that ask for it by name."""
    return HttpResponse(FAVICON.read_bytes(), content_type="image/x-icon")
