"""``Authorization: Bearer <API key>`` authentication for backend services."""

import time

from django.db.models.signals import m2m_changed, post_delete, post_save
from django.dispatch import receiver
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from backend.notifications.models import ApiClient
from backend.notifications.models.client import hash_api_key

# Seconds a web process reuses an API key's lookup: one query per key and process every few seconds
# instead of one per request (README "Throughput"). A key revoked elsewhere keeps working on the other
# processes for at most this long; the process that saved the change forgets every key at once.
KEY_CACHE_SECONDS = 5.0
_known: dict[str, tuple[float, ApiClient]] = {}


def _active_client(key_hash: str) -> ApiClient | None:
    """The active client holding the key whose SHA-256 is ``key_hash``, looked up at most every few seconds."""
    now = time.monotonic()
    known = _known.get(key_hash)
    if known is not None and now - known[0] < KEY_CACHE_SECONDS:
        return known[1]
    client = ApiClient.objects.filter(key_hash=key_hash, is_active=True).first()
    if client is None:
        _known.pop(key_hash, None)
    else:
        _known[key_hash] = (now, client)
    return client


@receiver([post_save, post_delete], sender=ApiClient)
@receiver(m2m_changed, sender=ApiClient.allowed_kinds.through)
def _forget_keys(**kwargs) -> None:
    _known.clear()


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
        client = _active_client(hash_api_key(key))
        if client is None:
            raise exceptions.AuthenticationFailed("Unknown or revoked API key.")
        now = timezone.now()
        # One write a minute at most per client and process, not one per request.
        if client.last_used_at is None or (now - client.last_used_at).total_seconds() > 60:
            ApiClient.objects.filter(pk=client.pk).update(last_used_at=now)
            client.last_used_at = now
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
