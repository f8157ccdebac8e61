"""The answers every operation of the API can give, added to the OpenAPI schema once instead of per view.

drf-spectacular lists what each view's ``extend_schema`` names; these come from layers in front of the
views, so a client generated from the schema would not know them otherwise.
"""

from typing import Any

# Every operation: the key (or the inbox token) is checked before the view runs (api/auth.py, inbox/api.py).
_ALWAYS = {"401": "JSON error `not_authenticated` or `authentication_failed`: no key, or an unknown or revoked one."}
# Every operation that reads a body.
_WITH_BODY = {
    "413": "JSON error `body_too_large`: the body is over NOTIFY_MAX_REQUEST_BODY bytes (1 MiB by default).",
    "415": "JSON error `unsupported_media_type`: the body must be sent as application/json.",
}


def common_answers(result: dict[str, Any], generator, request, public) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: 401 on every operation, 413 and 415 on those with a body.

    An answer a view already describes keeps its own description.
    """
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            extra = {**_ALWAYS, **(_WITH_BODY if "requestBody" in operation else {})}
            for code, description in extra.items():
                responses.setdefault(code, {"description": description})
            operation["responses"] = dict(sorted(responses.items()))
    return result
