"""The providers' delivery-receipt webhooks: no login, no CSRF token, a verified signature instead.

Every answer is a 2xx once the signature holds, even for a reference we never sent (logged), so the
provider stops retrying; a signature that does not hold is 403 and changes nothing. A body over
``NOTIFY["WEBHOOK_MAX_BODY"]`` bytes is 413 before anything is read into fields (backend/asgi.py
refuses it earlier under daphne), and a body that cannot be read is a 4xx, never a 500.
"""

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from backend.notifications.receipts import twilio, vonage
from backend.notifications.receipts.apply import ReceiptError, apply

FORM = "application/x-www-form-urlencoded"


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": code, "message": message}, status=status)


def _too_large(request: HttpRequest) -> JsonResponse | None:
    limit = settings.NOTIFY["WEBHOOK_MAX_BODY"]
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if (int(declared) if declared.isdigit() else 0) > limit or len(request.body) > limit:
        return _error(413, "body_too_large", f"A delivery receipt may be at most {limit} bytes.")
    return None


def public_url(request: HttpRequest) -> str:
    """The URL the provider requested, as it saw it: the webhook base URL + this path and query.

    Behind a proxy the request's own host and scheme are the proxy's, not what the provider signed.
    """
    base = settings.NOTIFY["WEBHOOK_BASE_URL"] or settings.NOTIFY["PUBLIC_URL"]
    return base.rstrip("/") + request.get_full_path()


@csrf_exempt
@require_POST
def twilio_receipt(request: HttpRequest) -> HttpResponse:
    """``POST /webhooks/twilio``: a status callback signed with ``X-Twilio-Signature``."""
    if refusal := _too_large(request):
        return refusal
    if request.content_type != FORM:
        return _error(415, "unsupported_media_type", f"Twilio posts status callbacks as {FORM}.")
    params = [(name, value) for name, values in request.POST.lists() for value in values]
    names = twilio.signing_providers(public_url(request), params, request.headers.get("X-Twilio-Signature", ""))
    if not names:
        return _error(403, "bad_signature", "The X-Twilio-Signature header does not sign this request.")
    try:
        receipt = twilio.read(request.POST)
    except ReceiptError as exc:
        return _error(400, "bad_receipt", str(exc))
    apply(names, receipt)
    return HttpResponse(status=204)


def _vonage_params(request: HttpRequest) -> dict[str, Any]:
    """The DLR's fields from the query (GET), a form or a JSON object (POST); ReceiptError otherwise."""
    if request.method == "GET":
        return request.GET.dict()
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body)
        except ValueError:
            raise ReceiptError("The body is not JSON.") from None
        except RecursionError:
            raise ReceiptError("The body's JSON nests too deeply.") from None
        if not isinstance(data, dict):
            raise ReceiptError("The body is not a JSON object.")
        return {str(name): value for name, value in data.items()}
    if request.content_type == FORM:
        return QueryDict(request.body, encoding="utf-8").dict()
    raise ReceiptError(f"Send the receipt as a query, {FORM} or application/json.")


@csrf_exempt
@require_http_methods(["GET", "POST"])
def vonage_receipt(request: HttpRequest) -> HttpResponse:
    """``GET``/``POST /webhooks/vonage``: a DLR signed with ``sig`` or a Bearer JWT."""
    if refusal := _too_large(request):
        return refusal
    try:
        params = _vonage_params(request)
    except ReceiptError as exc:
        return _error(400, "bad_receipt", str(exc))
    body = request.body if request.method == "POST" else b""
    names = vonage.signing_providers(params, request.headers.get("Authorization", ""), body)
    if not names:
        return _error(403, "bad_signature", "The receipt's signature (sig or the Bearer JWT) does not hold.")
    try:
        receipt = vonage.read(params)
    except ReceiptError as exc:
        return _error(400, "bad_receipt", str(exc))
    apply(names, receipt)
    return HttpResponse(status=204)
