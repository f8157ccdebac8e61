"""``POST /api/v1/users/{user_id}/preference-link``: a signed link to the user's preference center.

The calling service puts it in its own settings page or in a message; the
person needs no login (``links.py``). The link expires after
``NOTIFY_PREFERENCE_LINK_TTL`` seconds.
"""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications import links
from backend.notifications.models import Recipient

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


class PreferenceLinkSerializer(serializers.Serializer):
    url = serializers.URLField(help_text="The preference center of this user, on NOTIFY_PUBLIC_URL; no login needed.")
    expires_at = serializers.DateTimeField(help_text="After this instant the page says the link expired.")


class PreferenceLinkView(APIView):
    @extend_schema(
        operation_id="issue_preference_link",
        request=None,
        responses={201: PreferenceLinkSerializer, 401: _ERROR, 404: _ERROR},
    )
    def post(self, request: Request, user_id: str) -> Response:
        """A signed, expiring link to the user's preference center (opt-outs, quiet hours, time zone, language)."""
        if not Recipient.objects.filter(user_id=user_id).exists():
            raise NotFound(f"No user with id {user_id!r}.")
        expires_at = timezone.now() + timedelta(seconds=settings.NOTIFY["PREFERENCE_LINK_TTL"])
        body = {"url": links.preference_url(user_id), "expires_at": expires_at}
        return Response(PreferenceLinkSerializer(body).data, status=status.HTTP_201_CREATED)
