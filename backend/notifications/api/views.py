"""Views of /api/v1: parse, call one action, answer."""

import unicodedata

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ParseError, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications import actions, erasure
from backend.notifications.api import caller_rate, plain_send
from backend.notifications.api.answers import answered
from backend.notifications.api.errors import validation_response
from backend.notifications.api.parsers import json_object
from backend.notifications.api.serializers import (
    AcceptedSerializer,
    NotificationSerializer,
    RecipientSerializer,
    SendRequestSerializer,
    user_id_problem,
)
from backend.notifications.models import ApiClient, Notification, Recipient
from backend.notifications.rendering import BIDI_CONTROLS

IDEMPOTENCY_KEY_MAX = 255
# What idempotency_key accepts, as far as a pattern can say it: printable ASCII, no spaces at the ends.
IDEMPOTENCY_KEY_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": IDEMPOTENCY_KEY_MAX,
    "pattern": r"^[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?$",
}

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


def _notification(pk, client: ApiClient) -> Notification:
    """The notification ``pk`` as ``client`` sent it; ``NotFound`` for one another client sent.

    Idempotency keys are scoped per client, and so is reading: one service never learns what the
    platform sends for another (404, not 403, so an id of someone else's is not even confirmed).
    """
    notification = (
        Notification.objects.select_related("recipient", "kind", "template_version__kind")
        .prefetch_related("state_changes", "attempts")
        .filter(pk=pk, client=client)
        .first()
    )
    if notification is None:
        raise NotFound(f"No notification with id {pk}.")
    return notification


def key_problem(key: str, name: str = "'Idempotency-Key'") -> str | None:
    """Why the stripped ``key`` cannot be an idempotency key (None when it can): 1–255 characters, no controls.

    Neither C0/C1 controls nor bidirectional controls (Unicode TR #9 §2: embeddings, overrides, isolates).

    ``name`` is how the messages call it (the header, or a batch item's field).
    """
    if not key:
        return f"Missing {name}: name the event, e.g. order-5012-shipped."
    if len(key) > IDEMPOTENCY_KEY_MAX:
        return f"{name} may be at most {IDEMPOTENCY_KEY_MAX} characters."
    if any(unicodedata.category(c) == "Cc" for c in key):
        return f"{name} may not contain control characters."
    if BIDI_CONTROLS.intersection(key):
        # Support searches and reads keys: an override (U+202E) would show one key as another, as for user ids.
        return f"{name} may not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069)."
    return None


def idempotency_key(request: Request) -> str:
    """The request's ``Idempotency-Key`` (UTF-8, stripped, 1–255 characters); ``ParseError`` (400) otherwise.

    One rule for every endpoint that takes a key (sends, campaigns; batch items use ``key_problem``).
    """
    # HTTP header values arrive as Latin-1 (WSGI/ASGI); callers send UTF-8 bytes.
    raw = request.headers.get("Idempotency-Key", "")
    try:
        key = raw.encode("latin-1").decode("utf-8").strip()
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise ParseError("'Idempotency-Key' must be UTF-8 text.") from None
    if not key:
        raise ParseError("Missing 'Idempotency-Key' header: name the event, e.g. order-5012-shipped.")
    problem = key_problem(key)
    if problem:
        raise ParseError(problem)
    return key


class NotificationCreateView(APIView):
    @extend_schema(
        operation_id="send_notification",
        request=SendRequestSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                IDEMPOTENCY_KEY_SCHEMA,
                OpenApiParameter.HEADER,
                required=True,
                description=(
                    "A stable name of the event (order-5012-shipped), never a random per-attempt id. "
                    f"1 to {IDEMPOTENCY_KEY_MAX} characters; surrounding spaces are trimmed. The server also "
                    "takes UTF-8 text without control or bidirectional control characters; printable ASCII is what "
                    "every HTTP stack passes."
                ),
            )
        ],
        responses={
            202: AcceptedSerializer,
            200: OpenApiResponse(AcceptedSerializer, description="Duplicate: the original notification."),
            400: _ERROR,
            401: _ERROR,
            409: OpenApiResponse(description="JSON error `conflict`: the user was erased meanwhile; nothing stored."),
            422: _ERROR,
            429: OpenApiResponse(
                description="JSON error `rate_limited` with Retry-After: the client is over its own rate "
                "(ApiClient.rate_limit or NOTIFY_API_CLIENT_RATE notifications a second). Nothing was stored."
            ),
            503: OpenApiResponse(
                description="JSON error `unavailable` with Retry-After: the database is down, or an OTP's "
                "per-phone limit cannot be checked (Redis down). Retry with the same Idempotency-Key."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        """Accept a notification for delivery (202), or return the original for a repeated key (200)."""
        caller_rate.take(request.auth)
        key = idempotency_key(request)
        body = json_object(request)
        fields = plain_send.plainly_valid(body)
        if fields is None:
            serializer = SendRequestSerializer(data=body)
            serializer.is_valid(raise_exception=True)
            fields = serializer.validated_data
        send = actions.SendRequest(idempotency_key=key, **fields)
        try:
            accepted = actions.accept(send, client=request.auth)
        except actions.AcceptError as exc:
            return validation_response({exc.field: [exc.message]})
        except actions.IdempotencyConflict as exc:
            return validation_response({"Idempotency-Key": [str(exc)]})
        if accepted.duplicate:
            # The original as it is now, with its history and attempts (scoped to this client).
            original = _notification(accepted.notification.pk, accepted.notification.client)
            return Response(answered(actions.Accepted(original, duplicate=True)), status=status.HTTP_200_OK)
        return Response(answered(accepted), status=status.HTTP_202_ACCEPTED)


class NotificationDetailView(APIView):
    @extend_schema(operation_id="get_notification", responses={200: NotificationSerializer, 401: _ERROR, 404: _ERROR})
    def get(self, request: Request, pk) -> Response:
        """A notification's state, its state history with timestamps, and every provider attempt."""
        return Response(NotificationSerializer(_notification(pk, request.auth)).data)


class RecipientView(APIView):
    @extend_schema(operation_id="get_user", responses={200: RecipientSerializer, 401: _ERROR, 404: _ERROR})
    def get(self, request: Request, user_id: str) -> Response:
        """A user's contact data."""
        recipient = Recipient.objects.filter(user_id=user_id).first()
        if recipient is None:
            raise NotFound(f"No user with id {user_id!r}.")
        return Response(RecipientSerializer(recipient).data)

    @extend_schema(
        operation_id="put_user",
        request=RecipientSerializer,
        responses={200: RecipientSerializer, 201: RecipientSerializer, 400: _ERROR, 401: _ERROR, 422: _ERROR},
    )
    def put(self, request: Request, user_id: str) -> Response:
        """Create (201) or replace (200) a user's contact data; the phone is stored as E.164."""
        problem = user_id_problem(user_id)
        if problem:
            return validation_response({"user_id": [problem]})
        serializer = RecipientSerializer(data=json_object(request))
        serializer.is_valid(raise_exception=True)
        recipient, created = actions.upsert_recipient(user_id, serializer.validated_data)
        return Response(
            RecipientSerializer(recipient).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK
        )

    @extend_schema(
        operation_id="erase_user",
        responses={
            200: OpenApiResponse(
                description="Erased: `{user_id, erased: {notifications, devices, preferences, inbox_messages, "
                "segment_memberships}, at}`, what went."
            ),
            401: _ERROR,
            403: OpenApiResponse(description="JSON error `forbidden`: the client may not erase users (may erase)."),
            404: _ERROR,
            409: OpenApiResponse(
                description="JSON error `conflict` with Retry-After: a notification to the user is being handed to "
                "a provider right now, or one was accepted during the erasure; nothing was erased."
            ),
        },
    )
    def delete(self, request: Request, user_id: str) -> Response:
        """Erase a user on request (GDPR Art. 17): contact data, devices, preferences, inbox and every notification.

        Queued and scheduled notifications are never sent. What is kept: a record that names nobody (the
        admin's "Erasures") and the support explorer's audit of contacts staff revealed. See README "Erasure".
        """
        if not request.auth.may_erase:
            raise PermissionDenied(
                "This API client may not erase users: an erasure takes every client's notifications to the person "
                "with it. An administrator grants it (may erase) to the service that handles erasure requests."
            )
        try:
            erased = erasure.erase(user_id, by=actions.by_api_client(request.auth))
        except erasure.ErasureRefused as exc:
            return Response({"error": "conflict", "message": str(exc)}, status=409, headers={"Retry-After": "2"})
        if erased is None:
            raise NotFound(f"No user with id {user_id!r}.")
        record = erased.record
        counts = ("notifications", "devices", "preferences", "inbox_messages", "segment_memberships")
        return Response(
            {
                "user_id": user_id,
                "erased": {name: getattr(record, name) for name in counts},
                "at": record.at.isoformat().replace("+00:00", "Z"),
            }
        )
