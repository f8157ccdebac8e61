"""One JSON error shape for the whole API.

``{"error": code, "message": text a person can act on, "fields": {field: [problems]}}``;
``fields`` is present for validation errors only. Field validation answers
422, a body that is not JSON 400, a missing or bad key 401, unknown ids 404.
"""

from django.http import JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def _flatten(detail, name: str = "body") -> dict[str, list[str]]:
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
        for key, problems in _flatten(value, child).items():
            out.setdefault(key, []).extend(problems)
    return out


def validation_response(fields: dict[str, list[str]], status_code: int = 422) -> Response:
    """A 422 naming each field and its problems."""
    summary = "; ".join(f"{name}: {' '.join(problems)}" for name, problems in fields.items())
    return Response({"error": "invalid", "message": summary, "fields": fields}, status=status_code)


_CODES = {
    exceptions.ParseError: "malformed_request",
    exceptions.AuthenticationFailed: "not_authenticated",
    exceptions.NotAuthenticated: "not_authenticated",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.Throttled: "rate_limited",
}


def exception_handler(exc, context):
    """DRF's handler, reshaped into the API's error body."""
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        return validation_response(fields)
    code = next((code for cls, code in _CODES.items() if isinstance(exc, cls)), "error")
    if isinstance(exc, exceptions.NotAuthenticated):
        message = "Missing 'Authorization: Bearer <API key>' header."
    else:
        message = str(exc.detail if isinstance(exc, exceptions.APIException) else exc)
    response.data = {"error": code, "message": message}
    return response


def json_not_found(request, exception=None):
    """404 for unknown URLs: JSON under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": "not_found", "message": f"No such resource: {request.path}"}, status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)
