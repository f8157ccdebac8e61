"""``Authorization: Bearer <API key>`` authentication for backend services."""

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from backend.notifications.models import ApiClient
from backend.notifications.models.client import hash_api_key


class ApiKeyAuthentication(BaseAuthentication):
    """Authenticates a request by its API key; ``request.auth`` is the ``ApiClient``.

    Only the SHA-256 of the key is stored and looked up. Raises
    ``AuthenticationFailed`` (401) for a malformed header or an unknown or
    revoked key; a request without the header is left unauthenticated.
    """

    keyword = "Bearer"

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].decode(errors="replace").lower() != self.keyword.lower() or len(header) != 2:
            raise exceptions.AuthenticationFailed("Use the header 'Authorization: Bearer <API key>'.")
        key = header[1].decode(errors="replace")
        client = ApiClient.objects.filter(key_hash=hash_api_key(key), is_active=True).first()
        if client is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        now = timezone.now()
        # One write a minute at most per client, not one per request.
        if client.last_used_at is None or (now - client.last_used_at).total_seconds() > 60:
            ApiClient.objects.filter(pk=client.pk).update(last_used_at=now)
        return (None, client)

    def authenticate_header(self, request) -> str:
        return self.keyword


class IsApiClient(BasePermission):
    """Allows only requests authenticated by an active API key."""

    def has_permission(self, request, view) -> bool:
        return isinstance(request.auth, ApiClient)


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "backend.notifications.api.auth.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization", token_prefix="Bearer")
