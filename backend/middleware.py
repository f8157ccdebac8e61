"""Refusals for every route, before any view: a request the site cannot read gets a clear 4xx, never a 500.

Found by outside testing, each a 500 before:

* a control character in the path (``/api/v1/users/a%00b``): no route has
  one, and a NUL that reaches a query makes PostgreSQL refuse the statement.
  Every route's parameters (user ids, tokens, links) are covered here at once
  (query strings are left to the views: an odd one falls back to a default);
* a body charset other than UTF-8 (``Content-Type: application/json;
  charset=rot13``): Django decodes the body with any codec Python knows,
  rot13, base64 and bz2 included. JSON is UTF-8 (RFC 8259 §8.1) and every
  form of this site is served as UTF-8, so UTF-8 and its subset US-ASCII are
  the only charsets accepted.

Under ``/api/`` the answer has the API's error shape (``api/errors.py``).
"""

import codecs
import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

# C0 controls, DEL, C1 controls, and UTF-16 surrogates (which no UTF-8 path can carry).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CHARSETS = frozenset({"utf-8", "ascii"})  # codecs' names: "UTF8", "us-ascii" … normalise to these
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _refusal(request: HttpRequest, status: int, code: str, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"error": code, "message": message}, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def _charset_problem(request: HttpRequest) -> str:
    """Why the body's declared charset is refused ("" when it is UTF-8, US-ASCII or not given)."""
    charset = request.content_params.get("charset") if request.method in _BODY_METHODS else None
    if charset is None:
        return ""
    try:
        name = codecs.lookup(charset).name
    except LookupError:
        name = ""
    if name in _CHARSETS:
        return ""
    return f"The charset {charset[:40]!r} of the body is not supported: send UTF-8."


class UnreadableRequestMiddleware:
    """Answers 400 to a path with a control character, 415 to a body that is not UTF-8."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if _CONTROL.search(request.path_info):
            return _refusal(request, 400, "bad_request", "The URL contains a control character (such as NUL).")
        if problem := _charset_problem(request):
            return _refusal(request, 415, "unsupported_media_type", problem)
        return self.get_response(request)
