"""HTTP side of the inbox under /api/v1: the token a service fetches, and the fallback for clients
without WebSockets. Same message shape as the socket (``events.MessageDict``)."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications.api.parsers import single_valued
from backend.notifications.api.serializers import StrictSerializer
from inbox import actions, queries, tokens
from inbox.api_auth import InboxTokenAuthentication, OwnInbox
from inbox.events import message_payload

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


class TokenSerializer(serializers.Serializer):
    user_id = serializers.CharField()
    token = serializers.CharField(help_text="For /ws/inbox/?token=… and 'Authorization: Bearer …' on the inbox.")
    expires_at = serializers.DateTimeField()
    expires_in = serializers.IntegerField(help_text="Seconds.")


class MessageSerializer(serializers.Serializer):
    """Documents ``events.MessageDict``, which the views return as is."""

    id = serializers.IntegerField()
    kind = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()
    link = serializers.CharField(help_text="An http(s) URL or a site path; '' when none.")
    language = serializers.CharField()
    dir = serializers.ChoiceField(choices=["ltr", "rtl"])
    created_at = serializers.DateTimeField()
    read_at = serializers.DateTimeField(allow_null=True)
    archived_at = serializers.DateTimeField(allow_null=True)


class PageSerializer(serializers.Serializer):
    unread = serializers.IntegerField()
    last_id = serializers.IntegerField(help_text="The newest message id, archived ones included; 0 when empty.")
    messages = MessageSerializer(many=True, help_text="Ascending id order.")
    more = serializers.BooleanField(help_text="More messages lie past this page's edge.")


class MessageChangeSerializer(serializers.Serializer):
    message = MessageSerializer()
    unread = serializers.IntegerField()


class ReadAllSerializer(StrictSerializer):
    through = serializers.IntegerField(
        required=False, min_value=0, help_text="Newest id the person has seen; later messages stay unread."
    )


class ReadAllResultSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(), help_text="The messages this call marked read.")
    unread = serializers.IntegerField()


class PageQuerySerializer(StrictSerializer):
    after = serializers.IntegerField(required=False, min_value=0, help_text="Every message after this id (sync).")
    before = serializers.IntegerField(required=False, min_value=1, help_text="Older unarchived messages.")
    limit = serializers.IntegerField(required=False, min_value=1, max_value=queries.MAX_PAGE)

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if "after" in attrs and "before" in attrs:
            raise serializers.ValidationError({"after": ["Give 'after' or 'before', not both."]})
        return attrs


def _recipient(user_id: str) -> int:
    recipient = queries.recipient_pk(user_id)
    if recipient is None:
        raise NotFound(f"No user with id {user_id!r}.")
    return recipient


class InboxTokenView(APIView):
    @extend_schema(
        operation_id="issue_inbox_token", request=None, responses={200: TokenSerializer, 401: _ERROR, 404: _ERROR}
    )
    def post(self, request: Request, user_id: str) -> Response:
        """A short-lived token for the user's inbox socket and HTTP fallback (API key required)."""
        _recipient(user_id)
        token = tokens.issue(user_id)
        return Response(
            {"user_id": user_id, "token": token.value, "expires_at": token.expires_at, "expires_in": token.expires_in}
        )


class _InboxView(APIView):
    authentication_classes = [InboxTokenAuthentication]
    permission_classes = [OwnInbox]


class InboxView(_InboxView):
    @extend_schema(
        operation_id="list_inbox",
        parameters=[PageQuerySerializer],
        responses={200: PageSerializer, 401: _ERROR, 403: _ERROR, 404: _ERROR, 422: _ERROR},
    )
    def get(self, request: Request, user_id: str) -> Response:
        """The newest page (default), older messages (``before``), or every message after an id (``after``)."""
        query = PageQuerySerializer(data=single_valued(request.query_params))
        query.is_valid(raise_exception=True)
        recipient, params = _recipient(user_id), query.validated_data
        limit = params.get("limit", queries.PAGE_SIZE)
        if "after" in params:
            page = queries.after(recipient, params["after"], limit)
        else:
            page = queries.latest(recipient, limit, params.get("before"))
        return Response(
            {
                "unread": queries.unread_count(recipient),
                "last_id": queries.last_id(recipient),
                "messages": page.payload(),
                "more": page.more,
            }
        )


def _change(action, user_id: str, message_id: int) -> Response:
    try:
        message, change = action(user_id, message_id)
    except (actions.MessageNotFound, actions.UnknownUser):
        raise NotFound(f"No message {message_id} in this inbox.") from None
    return Response({"message": message_payload(message), "unread": change.unread})


class MessageReadView(_InboxView):
    @extend_schema(
        operation_id="mark_inbox_message_read",
        request=None,
        responses={200: MessageChangeSerializer, 401: _ERROR, 403: _ERROR, 404: _ERROR},
    )
    def post(self, request: Request, user_id: str, message_id: int) -> Response:
        """Mark one message read; the user's open sockets hear ``message.read``."""
        return _change(actions.mark_read, user_id, message_id)


class MessageArchiveView(_InboxView):
    @extend_schema(
        operation_id="archive_inbox_message",
        request=None,
        responses={200: MessageChangeSerializer, 401: _ERROR, 403: _ERROR, 404: _ERROR},
    )
    def post(self, request: Request, user_id: str, message_id: int) -> Response:
        """Archive one message; the user's open sockets hear ``message.archived``."""
        return _change(actions.archive, user_id, message_id)


class ReadAllView(_InboxView):
    @extend_schema(
        operation_id="mark_inbox_read",
        request=ReadAllSerializer,
        responses={200: ReadAllResultSerializer, 401: _ERROR, 403: _ERROR, 404: _ERROR, 422: _ERROR},
    )
    def post(self, request: Request, user_id: str) -> Response:
        """Mark every unread message read (up to ``through`` when given)."""
        data = request.data if request.data else {}
        if not isinstance(data, dict):
            raise ParseError("The body must be a JSON object.")
        body = ReadAllSerializer(data=data)
        body.is_valid(raise_exception=True)
        try:
            change = actions.mark_all_read(user_id, body.validated_data.get("through"))
        except actions.UnknownUser:
            raise NotFound(f"No user with id {user_id!r}.") from None
        return Response({"ids": change.ids, "unread": change.unread})
