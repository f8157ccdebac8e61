"""Push through Firebase Cloud Messaging HTTP v1.

``POST {base_url}/v1/projects/{project_id}/messages:send`` with an OAuth 2
bearer token and ``{"message": {"token", "notification": {"title", "body"}, "data"}}``;
200 with ``{"name": "projects/…/messages/…"}``.
https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages/send
Errors: https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode —
404 ``UNREGISTERED`` and 400 ``INVALID_ARGUMENT`` on the token mean the token
is dead; 429 ``QUOTA_EXCEEDED`` and 5xx are transient, honouring Retry-After.
Options: ``base_url``, ``project_id``, and ``access_token`` (tests, stubs) or
``service_account_file`` (production; tokens minted by google-auth).
"""

import threading

from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

_DEAD_TOKEN = {"UNREGISTERED", "INVALID_ARGUMENT", "SENDER_ID_MISMATCH"}
_SCOPE = "https://www.googleapis.com/auth/firebase.messaging"


@register
class FcmProvider(Provider):
    name = "fcm"
    channel = "push"

    def __init__(self, config=None):
        super().__init__(config)
        self._credentials = None
        self._lock = threading.Lock()

    def _token(self) -> str:
        if self.config.option("access_token"):
            return self.config.option("access_token")
        from google.auth.transport.requests import Request
        from google.oauth2 import service_account

        with self._lock:
            if self._credentials is None:
                self._credentials = service_account.Credentials.from_service_account_file(
                    self.config.option("service_account_file"), scopes=[_SCOPE]
                )
            if not self._credentials.valid:
                self._credentials.refresh(Request())
            return self._credentials.token

    def send(self, message: OutboundMessage) -> str:
        options = self.config.options
        url = f"{options.get('base_url', 'https://fcm.googleapis.com').rstrip('/')}"
        url += f"/v1/projects/{options['project_id']}/messages:send"
        body = {
            "message": {
                "token": message.to,
                "notification": {"title": message.subject, "body": message.text},
                "data": {"notification_id": message.notification_id},
            }
        }
        response = http.post(url, json=body, headers={"Authorization": f"Bearer {self._token()}"}, timeout=self.timeout)
        if response.status_code == 200:
            return response.json()["name"]
        raise self._error(response)

    def _error(self, response) -> ProviderError:
        transient = http.transient_for_status("fcm", response)
        if transient is not None:
            return transient
        try:
            error = response.json()["error"]
        except (ValueError, KeyError, TypeError):
            error = {}
        codes = {d.get("errorCode") for d in error.get("details", []) if isinstance(d, dict)}
        code = next(iter(codes - {None}), error.get("status", ""))
        detail = f"fcm {response.status_code} {code}: {error.get('message', response.text[:200])}"
        if response.status_code == 404 or code in _DEAD_TOKEN:
            return ProviderError(detail, permanent=True, address_invalid=True)
        if response.status_code == 401:
            return ProviderError(detail, permanent=False)
        return ProviderError(detail, permanent=True)
