"""One JSON error shape for the whole API.

``{"error": code, "message": text a person can act on, "fields": {field: [problems]}}``;
``fields`` is present for validation errors only. Field validation answers
422, a body that is not JSON 400, a missing or bad key 401, unknown ids 404.
A dependency that is down answers 503 with ``Retry-After`` (error
``unavailable``): the database unreachable, or an OTP whose per-phone limit
cannot be checked without Redis (policy.LimitUnavailable).
"""

import logging
import sys

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, InterfaceError, OperationalError
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from backend.notifications.api.caller_rate import BatchOverBurst
from backend.notifications.policy import LimitUnavailable

logger = logging.getLogger(__name__)

# Connection failures (refused, dropped, timed out, a pool without a free connection) and other
# transient trouble of the database: the request may succeed a moment later, so 503, not 500.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
# Seconds a caller is asked to wait while the database is unreachable.
DATABASE_RETRY_AFTER = 5
DATABASE_MESSAGE = (
    f"The database is unavailable right now. Retry after {DATABASE_RETRY_AFTER} seconds; a send retried "
    "with the same Idempotency-Key is never doubled."
)


def flatten(detail, name: str = "body") -> dict[str, list[str]]:
    """DRF's nested error detail as ``{"field.sub.0": ["problem", ...]}``."""
    if isinstance(detail, dict):
        items = [
            (name if key == "non_field_errors" else key if name == "body" else f"{name}.{key}", value)
            for key, value in detail.items()
        ]
    elif isinstance(detail, list) and any(isinstance(item, dict | list) for item in detail):
        items = [(f"{name}.{index}", item) for index, item in enumerate(detail)]
    elif isinstance(detail, list):
        return {name: [str(item) for item in detail]} if detail else {}
    else:
        return {name: [str(detail)]}
    out: dict[str, list[str]] = {}
    for child, value in items:
        for key, problems in flatten(value, child).items():
            out.setdefault(key, []).extend(problems)
    return out


def invalid_body(fields: dict[str, list[str]]) -> dict:
    """The body of a 422: ``{"error": "invalid", "message": summary, "fields": fields}``."""
    summary = "; ".join(f"{name}: {' '.join(problems)}" for name, problems in fields.items())
    return {"error": "invalid", "message": summary, "fields": fields}


def validation_response(fields: dict[str, list[str]], status_code: int = 422) -> Response:
    """A 422 naming each field and its problems."""
    return Response(invalid_body(fields), status=status_code)


_CODES = {
    exceptions.ParseError: "malformed_request",
    exceptions.AuthenticationFailed: "not_authenticated",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    BatchOverBurst: "batch_over_burst",
    exceptions.Throttled: "rate_limited",
}


def unavailable_response(message: str, retry_after: int) -> Response:
    """503 ``{"error": "unavailable", "message": …}`` with ``Retry-After`` (seconds)."""
    return Response({"error": "unavailable", "message": message}, status=503, headers={"Retry-After": str(retry_after)})


# A row an accepted send refers to went between its read and its insert: a user erased at that moment
# (erasure.py). The insert failed whole, so nothing was stored and the caller may simply send again.
ERASED_MEANWHILE = (
    "A user this request names was erased while it was being accepted: nothing was stored. Send it again; "
    "an erased user is an unknown user (422)."
)


def _erased_meanwhile(exc: IntegrityError) -> bool:
    """True for a foreign-key violation (SQLSTATE 23503) by a new notification or its history, not a bug's."""
    cause = exc.__cause__
    table = getattr(getattr(cause, "diag", None), "table_name", "") or ""
    return getattr(cause, "sqlstate", None) == "23503" and table.startswith("notifications_")


def exception_handler(exc, context):
    """DRF's handler, reshaped into the API's error body."""
    if isinstance(exc, IntegrityError) and _erased_meanwhile(exc):
        return Response({"error": "conflict", "message": ERASED_MEANWHILE}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, LimitUnavailable):
        return unavailable_response(exc.message, exc.retry_after)
    if isinstance(exc, DATABASE_UNAVAILABLE):
        logger.warning("database unavailable: %s", exc)
        return unavailable_response(DATABASE_MESSAGE, DATABASE_RETRY_AFTER)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"error": "body_too_large", "message": f"The request body may be at most {limit} bytes."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        # Django's bare Http404 (DRF raises one for an unknown ?format=): its text is "", its class no API code.
        request = context["request"]
        exc = exceptions.NotFound(str(exc) or f"No such resource or format: {request.get_full_path()}")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten(exc.detail)
        return validation_response(fields)
    code = next((code for cls, code in _CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.NotAuthenticated):
        message = "Missing 'Authorization: Bearer <API key>' header."
    else:
        message = str(exc.detail if isinstance(exc, exceptions.APIException) else exc)
    response.data = {"error": code, "message": message}
    return response


@csrf_exempt  # a POST to a wrong URL is a 404, not a CSRF page: API callers send no cookies
def api_not_found(request, *args, **kwargs):
    """Any URL under /api/ that names no resource (a catch-all route, so DEBUG pages never answer the API)."""
    return JsonResponse({"error": "not_found", "message": f"No such resource: {request.path}"}, status=404)


def json_bad_request(request, exception=None):
    """400 (Django's own: a bad Host, an oversized or malformed request): JSON under /api/."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "bad_request", "message": "The request could not be read."}, status=400)
    from django.views.defaults import bad_request

    return bad_request(request, exception)


def database_unavailable(request) -> HttpResponse:
    """503 with ``Retry-After`` while the database is unreachable: JSON under /api/, a short page elsewhere."""
    headers = {"Retry-After": str(DATABASE_RETRY_AFTER)}
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "unavailable", "message": DATABASE_MESSAGE}, status=503, headers=headers)
    page = (
        "<!doctype html><title>Temporarily unavailable</title><h1>Service temporarily unavailable</h1>"
        f"<p>Please try again in {DATABASE_RETRY_AFTER} seconds.</p>"
    )
    return HttpResponse(page, status=503, headers=headers)


class DatabaseUnavailableMiddleware:
    """Turns a database outage in any view into ``database_unavailable`` (503), never a 500 page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, DATABASE_UNAVAILABLE):
            return None
        logger.warning("database unavailable: %s %s: %s", request.method, request.path, exception)
        return database_unavailable(request)


def json_server_error(request):
    """500: JSON under /api/, so a client never has to parse an HTML error page.

    A database outage raised outside a view (by a middleware) still answers 503.
    """
    if isinstance(sys.exc_info()[1], DATABASE_UNAVAILABLE):
        return database_unavailable(request)
    if request.path.startswith("/api/"):
        return JsonResponse(
            {
                "error": "server_error",
                "message": "Something failed on our side; it is logged. Retry with the same key.",
            },
            status=500,
        )
    from django.views.defaults import server_error

    return server_error(request)
