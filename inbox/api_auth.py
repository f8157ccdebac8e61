"""``Authorization: Bearer <inbox token>`` for the inbox's HTTP fallback (end users, not services)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from backend.notifications import links
from backend.notifications.models import Recipient
from inbox import tokens


class InboxUser:
    """The person an inbox token was issued for (``request.auth``)."""

    def __init__(self, user_id: str):
        self.user_id = user_id


class InboxTokenAuthentication(BaseAuthentication):
    """Authenticates by an inbox token; 401 for a missing, invalid or expired one, saying which."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].decode(errors="replace").lower() != self.keyword.lower() or len(header) != 2:
            # AuthenticationFailed, not NotAuthenticated: the API's error handler words the
            # latter for API keys, and a browser holding an inbox token has no API key.
            raise exceptions.AuthenticationFailed("Missing 'Authorization: Bearer <inbox token>' header.")
        token = header[1].decode(errors="replace")
        try:
            user_id = tokens.verify(token)
        except tokens.ExpiredToken:
            raise exceptions.AuthenticationFailed("The inbox token has expired; get a new one.") from None
        except tokens.InvalidToken:
            raise exceptions.AuthenticationFailed("The inbox token is not valid.") from None
        created = Recipient.objects.filter(user_id=user_id).values_list("created_at", flat=True).first()
        if created is not None and links.issued_before(token, created):
            # Made for an earlier record of this user id, erased since (erasure.py): never the new one's inbox.
            raise exceptions.AuthenticationFailed("The inbox token is not valid.")
        return (None, InboxUser(user_id))

    def authenticate_header(self, request) -> str:
        return self.keyword


class OwnInbox(BasePermission):
    """Only the token's own user: another user's inbox answers 403."""

    message = "This token opens another user's inbox."

    def has_permission(self, request, view) -> bool:
        auth = request.auth
        return isinstance(auth, InboxUser) and auth.user_id == view.kwargs.get("user_id")


class InboxTokenScheme(OpenApiAuthenticationExtension):
    target_class = "inbox.api_auth.InboxTokenAuthentication"
    name = "inboxToken"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")
