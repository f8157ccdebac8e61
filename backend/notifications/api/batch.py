"""``POST /api/v1/notifications/batch``: many sends in one request, each answered as the single send would be."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications import actions, policy
from backend.notifications.actions.accept_batch import Outcome
from backend.notifications.api import caller_rate, plain_send
from backend.notifications.api.answers import answered
from backend.notifications.api.errors import flatten, invalid_body
from backend.notifications.api.parsers import BatchJSONParser, json_object, text_problem_at, text_refusal
from backend.notifications.api.serializers import (
    BatchItemSerializer,
    BatchRequestSerializer,
    BatchResponseSerializer,
)
from backend.notifications.api.views import key_problem
from backend.notifications.models import ApiClient

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")
# One result: the HTTP status and body the single send would have answered.
Result = tuple[int, dict]

_EXAMPLE = {
    "items": [
        {"idempotency_key": "order-5012-shipped", "user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}},
        {"idempotency_key": "order-5013-shipped", "user_id": "ghost", "kind": "shipped", "params": {"order": "5013"}},
    ]
}


def batch_items(request: Request) -> list:
    """The body's ``items``: a list of 1 to ``MAX_BATCH`` entries; ``ParseError`` (400) for any other shape."""
    body = json_object(request)
    if set(body) != {"items"} or not isinstance(body["items"], list):
        raise ParseError('The body must be {"items": [...]}: a list of sends, each with its idempotency_key.')
    items = body["items"]
    if not items:
        raise ParseError(f"A batch holds 1 to {actions.MAX_BATCH} items; this one has none.")
    if len(items) > actions.MAX_BATCH:
        raise ParseError(f"A batch holds 1 to {actions.MAX_BATCH} items; this one has {len(items)}. Split it.")
    return items


def _read(item: object, reader: BatchItemSerializer) -> actions.SendRequest | Result:
    """One item as a ``SendRequest``, or the 422 the single send would answer for it.

    ``reader`` validates every item of the batch: DRF builds a serializer's fields per instance.
    """
    if not isinstance(item, dict):
        return 422, invalid_body({"body": ["Each item must be a JSON object: a send with its idempotency_key."]})
    problem = text_problem_at(item, "")
    if problem:
        return 422, invalid_body(text_refusal(*problem))
    fields = plain_send.plainly_valid_item(item)
    if fields is None:
        try:
            fields = dict(reader.run_validation(item))
        except ValidationError as exc:
            return 422, invalid_body(flatten(exc.detail))
    key = fields.pop("idempotency_key").strip()
    problem = key_problem(key, "idempotency_key")
    if problem:
        return 422, invalid_body({"idempotency_key": [problem]})
    return actions.SendRequest(idempotency_key=key, **fields)


def _answers(outcomes: list[Outcome]) -> list[Result]:
    """What the single send answers for each outcome: 202, 200, 422 or 503, with its body."""
    zone = timezone.get_current_timezone()
    return [
        ((200 if outcome.duplicate else 202), answered(outcome, zone))
        if isinstance(outcome, actions.Accepted)
        else _refusal(outcome)
        for outcome in outcomes
    ]


def _refusal(outcome: Outcome) -> Result:
    if isinstance(outcome, actions.AcceptError):
        return 422, invalid_body({outcome.field: [outcome.message]})
    if isinstance(outcome, actions.IdempotencyConflict):
        return 422, invalid_body({"idempotency_key": [str(outcome)]})
    if isinstance(outcome, policy.LimitUnavailable):
        return 503, {"error": "unavailable", "message": outcome.message}
    raise TypeError(f"not an outcome of accept_batch: {outcome!r}")


def _answered_items(items: list, client: ApiClient) -> list[Result]:
    """Each item's result, in order: read, then the readable ones accepted together."""
    results: list[Result | None] = []
    sends: list[actions.SendRequest] = []
    reader = BatchItemSerializer()
    for item in items:
        read = _read(item, reader)
        if isinstance(read, actions.SendRequest):
            sends.append(read)
            results.append(None)
        else:
            results.append(read)
    answers = iter(_answers(actions.accept_batch(sends, client=client)) if sends else [])
    return [result if result is not None else next(answers) for result in results]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Hold Python's cyclic garbage collector off while a batch is worked on; it runs again after.

    A batch makes a few hundred thousand container objects that live until its answer is built,
    and the collector's young passes walked them again and again: about 25 of the 280 ms of CPU a
    batch of 1,000 took (README "Throughput: the send API"). Reference counting still frees the
    rest at once; only cycles wait for the next pass. The switch is process-wide: a thread running
    beside (none does in a granian worker, which serves one request at a time) only has its cycles wait
    too, and whichever pause found the collector on turns it back on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


class NotificationBatchView(APIView):
    parser_classes = [BatchJSONParser]

    @extend_schema(
        operation_id="send_notifications_batch",
        request=BatchRequestSerializer,
        responses={
            200: BatchResponseSerializer,
            400: OpenApiResponse(description="Not JSON, not {items: [...]}, or more than 1,000 items."),
            401: _ERROR,
            409: OpenApiResponse(description="JSON error `conflict`: a user was erased meanwhile; nothing stored."),
            413: OpenApiResponse(
                description="JSON error `body_too_large` (over NOTIFY_MAX_REQUEST_BODY bytes), or `batch_over_burst`: "
                "more items than the client's rate bucket ever holds; split the batch. Nothing was stored."
            ),
            429: OpenApiResponse(
                description="JSON error `rate_limited` with Retry-After: the batch's items are over the client's own "
                "rate. Nothing was stored."
            ),
            503: OpenApiResponse(description="JSON error `unavailable` with Retry-After: the database is down."),
        },
        examples=[OpenApiExample("Two sends, the second to an unknown user", value=_EXAMPLE, request_only=True)],
    )
    def post(self, request: Request) -> Response:
        """Send up to 1,000 notifications at once; each item is answered as ``POST /notifications`` would answer it.

        Each item is the single send's body plus its own ``idempotency_key``. The answer lists the
        results in the order of the items: ``{"status": 202|200|422|503, "body": …}``, the body being
        the single send's for that status. One refused item never fails the others; retry only the
        items answered 503 (or the whole batch: items already stored answer 200 with their original).
        """
        items = batch_items(request)
        caller_rate.take(request.auth, len(items))
        with _collector_paused():
            answered = _answered_items(items, request.auth)
        counts = {202: 0, 200: 0}
        for status_code, _ in answered:
            counts[status_code] = counts.get(status_code, 0) + 1
        return Response(
            {
                "accepted": counts[202],
                "duplicates": counts[200],
                "errors": len(answered) - counts[202] - counts[200],
                "results": [{"status": status_code, "body": body} for status_code, body in answered],
            }
        )
