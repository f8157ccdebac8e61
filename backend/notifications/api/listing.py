"""``GET /api/v1/notifications?user_id=…``: what a service sent to one person, newest first, keyset-paginated.

A page is ``limit`` rows (1–100, default 20) ordered by ``(created_at, id)`` descending, served by
the ``(recipient, -created_at)`` index. The cursors are opaque strings naming one row's
``(created_at, id)``: ``after=<next>`` reads the rows after it in this order (older),
``before=<previous>`` the rows before it (newer). A cursor never skips nor repeats a row while
new ones arrive, unlike an offset. A client sees only the notifications it sent (a campaign's rows
have no client) unless its key has ``reads_all_notifications``; ``POST …/{id}/cancel`` stops one
(``actions/cancel.py``).
"""

import base64
import binascii
import uuid
from datetime import UTC, datetime

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications.actions.cancel import NotCancellable, cancel
from backend.notifications.api.parsers import single_valued
from backend.notifications.api.serializers import (
    MaskedParamsField,
    NotificationSerializer,
    StrictSerializer,
    UserIdField,
)
from backend.notifications.api.views import NotificationCreateView, _notification
from backend.notifications.models import ApiClient, Notification, State

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


def encode_cursor(notification: Notification) -> str:
    """The opaque cursor of one row: URL-safe base64 of ``<created_at ISO 8601>|<id>``."""
    raw = f"{notification.created_at.isoformat()}|{notification.pk}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    """``(created_at, id)`` of a cursor from ``encode_cursor``; raises ``ValidationError`` for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        at, _sep, pk = raw.partition("|")
        created_at, notification_id = parse_datetime(at), uuid.UUID(pk)
        # In UTC: PostgreSQL refuses offsets past ±15:59 that parse_datetime takes (a forged cursor, a 500).
        created_at = created_at.astimezone(UTC) if created_at and created_at.tzinfo else None
    except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError):
        created_at = None
    if created_at is None:
        raise serializers.ValidationError("Not a cursor of this list: pass a 'next' or 'previous' value unchanged.")
    return created_at, notification_id


class CursorField(serializers.CharField):
    def to_internal_value(self, data) -> tuple[datetime, uuid.UUID]:
        return decode_cursor(super().to_internal_value(data))


class ListQuerySerializer(StrictSerializer):
    """The query string of the list; unknown parameters are refused (a typo never widens the list)."""

    user_id = UserIdField(help_text="The person, as your systems name them.")
    kind = serializers.SlugField(max_length=64, required=False, help_text="Only this kind (e.g. shipped).")
    state = serializers.ChoiceField(choices=State.choices, required=False, help_text="Only this state.")
    after = CursorField(max_length=200, required=False, help_text="A page's 'next': the older rows after it.")
    before = CursorField(max_length=200, required=False, help_text="A page's 'previous': the newer rows before it.")
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)

    def validate(self, attrs: dict) -> dict:
        if "after" in attrs and "before" in attrs:
            raise serializers.ValidationError({"before": ["Give 'after' or 'before', not both."]})
        return attrs


class NotificationSummarySerializer(serializers.ModelSerializer):
    """A row of the list: the notification without its history and attempts (GET /notifications/{id} has them)."""

    user_id = serializers.CharField(source="recipient.user_id")
    kind = serializers.CharField(source="kind.name")
    params = MaskedParamsField(help_text="As sent, with each secret param (an OTP code) shown as ••••••.")
    template = serializers.SerializerMethodField()

    class Meta:
        model = Notification
        fields = [
            "id", "idempotency_key", "user_id", "kind", "channel", "priority", "params", "state", "reason",
            "send_at", "template", "preview", "provider", "provider_ref", "attempt_count", "created_at",
            "sent_at",
        ]  # fmt: skip

    def get_template(self, obj: Notification) -> str | None:
        return str(obj.template_version) if obj.template_version_id else None


class NotificationPageSerializer(serializers.Serializer):
    results = NotificationSummarySerializer(many=True)
    next = serializers.CharField(allow_null=True, help_text="Pass as 'after' for the older rows; null at the end.")
    previous = serializers.CharField(allow_null=True, help_text="Pass as 'before' for the newer rows; null at the top.")


def visible_to(client: ApiClient) -> QuerySet[Notification]:
    """The notifications ``client`` may read: its own, or every one with ``reads_all_notifications``."""
    rows = Notification.objects.all()
    return rows if client.reads_all_notifications else rows.filter(client=client)


def _page(rows: QuerySet[Notification], query: dict) -> dict:
    """Rows of one page, newest first, with the cursors around it (one query: ``limit`` + 1 rows say if more exist)."""
    limit = query["limit"]
    if "before" in query:
        at, pk = query["before"]
        newer = rows.filter(Q(created_at__gt=at) | Q(created_at=at, pk__gt=pk)).order_by("created_at", "pk")
        found = list(newer[: limit + 1])
        page, more_newer, more_older = found[:limit][::-1], len(found) > limit, True
    else:
        if "after" in query:
            at, pk = query["after"]
            rows = rows.filter(Q(created_at__lt=at) | Q(created_at=at, pk__lt=pk))
        found = list(rows.order_by("-created_at", "-pk")[: limit + 1])
        page, more_newer, more_older = found[:limit], "after" in query, len(found) > limit
    return {
        "results": page,
        "previous": encode_cursor(page[0]) if page and more_newer else None,
        "next": encode_cursor(page[-1]) if page and more_older else None,
    }


class NotificationListView(APIView):
    """The GET half of /api/v1/notifications (the POST half is ``views.NotificationCreateView``)."""

    @extend_schema(
        operation_id="list_notifications",
        parameters=[ListQuerySerializer],
        responses={200: NotificationPageSerializer, 401: _ERROR, 422: _ERROR},
    )
    def get(self, request: Request) -> Response:
        """What this service sent to one person, newest first; ``next`` / ``previous`` cursors page through."""
        query_serializer = ListQuerySerializer(data=single_valued(request.query_params))
        query_serializer.is_valid(raise_exception=True)
        query = query_serializer.validated_data
        rows = visible_to(request.auth).filter(recipient__user_id=query["user_id"])
        rows = rows.select_related("recipient", "kind", "template_version__kind")
        if "kind" in query:
            rows = rows.filter(kind__name=query["kind"])
        if "state" in query:
            rows = rows.filter(state=query["state"])
        return Response(NotificationPageSerializer(_page(rows, query)).data)


class NotificationsView(NotificationCreateView, NotificationListView):
    """/api/v1/notifications: POST sends (``views``), GET lists (here)."""


class NotificationCancelView(APIView):
    @extend_schema(
        operation_id="cancel_notification",
        request=None,
        responses={
            200: NotificationSerializer,
            401: _ERROR,
            404: _ERROR,
            409: OpenApiResponse(
                description="JSON error `not_cancellable` with `state`: already handed to a provider, or ended."
            ),
        },
    )
    def post(self, request: Request, pk) -> Response:
        """Cancel a ``scheduled`` or ``queued`` notification that no provider was handed: 200, state ``cancelled``."""
        notification = (
            Notification.objects.select_related("recipient", "kind").filter(pk=pk, client=request.auth).first()
        )
        if notification is None:
            raise NotFound(f"No notification with id {pk}.")
        try:
            cancel(notification)
        except NotCancellable as exc:
            return Response({"error": "not_cancellable", "message": str(exc), "state": exc.state}, status=409)
        return Response(NotificationSerializer(_notification(pk, request.auth)).data)
