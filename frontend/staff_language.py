"""Staff pages in English, left to right, whatever language the browser asks for.

The staff pages (start page, template editor, campaigns, support, dashboard) are written in English.
Laid out right to left for a browser that asks for Arabic or Persian, their English lines came out
scrambled: "closed :webpush", "ms 8", "UTC 08:20:58 2026-12-02", and dates with Arabic month names
beside English ones. What is in a user's language on them (previews, template text, names, ids) keeps
its own direction (``dir="rtl"``, ``dir="auto"``, ``<bdi>``). Pages with translations keep the
visitor's language: a signed link's pages (preferences, unsubscribe, inbox), the error pages (which
read ``request.visitor_language``), and Django's admin, which Django translates.
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils import translation

# The staff pages' paths; "/" is the start page itself.
STAFF_PREFIXES = ("/templates/", "/campaigns/", "/support/")
STAFF_LANGUAGE = "en"


def is_staff_page(path: str) -> bool:
    """Whether ``path`` is one of the staff pages (written in English)."""
    return path == "/" or path.startswith(STAFF_PREFIXES)


class StaffPagesInEnglish:
    """After ``LocaleMiddleware``: English for the staff pages, the visitor's language kept for their error pages."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.visitor_language = translation.get_language()
        if is_staff_page(request.path):
            translation.activate(STAFF_LANGUAGE)
            request.LANGUAGE_CODE = STAFF_LANGUAGE
        return self.get_response(request)
