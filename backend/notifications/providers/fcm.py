"""Push through Firebase Cloud Messaging HTTP v1.

``POST {base_url}/v1/projects/{project_id}/messages:send`` with an OAuth 2
bearer token and ``{"message": {"token", "notification": {"title", "body"}, "data"}}``;
200 with ``{"name": "projects/…/messages/…"}``.
https://firebase.google.com/docs/reference/fcm/rest/v1/projects.messages/send
Errors (the ``errorCode`` of the ``google.firebase.fcm.v1.FcmError`` detail,
https://firebase.google.com/docs/reference/fcm/rest/v1/ErrorCode and
https://firebase.google.com/docs/cloud-messaging/error-codes):

- 404 ``UNREGISTERED``, 403 ``SENDER_ID_MISMATCH``: the token is dead or not
  ours; permanent, and the device is disabled.
- 400 ``INVALID_ARGUMENT``: permanent for this notification. FCM says it for
  payload faults too (message too big, bad data key, bad TTL), so the device
  is disabled only when the error names the token: a ``google.rpc.BadRequest``
  field violation on ``message.token``, or, with no field named, the message
  FCM gives for a bad token ("The registration token is not a valid FCM
  registration token", example 2 of the error-codes page).
- 401 ``THIRD_PARTY_AUTH_ERROR``: our APNs certificate or web push key in the
  Firebase project is wrong; permanent, devices kept. Any other 401 is our
  OAuth token expiring: transient.
- 429 ``QUOTA_EXCEEDED``, 503 ``UNAVAILABLE``, 500 ``INTERNAL``: transient,
  honouring Retry-After.
- Anything else (a 404 without ``UNREGISTERED``, e.g. a wrong project id):
  permanent for the notification, devices kept.
Options: ``base_url``, ``project_id``, and ``access_token`` (tests, stubs) or
``service_account_file`` (production; tokens minted by google-auth).
"""

import threading

from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

_DEAD_TOKEN = {"UNREGISTERED", "SENDER_ID_MISMATCH"}
_FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
_BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
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
        return self.reference(http.send(self.request(message)))

    def request(self, message: OutboundMessage) -> http.Request:
        """The messages:send call for ``message``, with a bearer token (minted first if it expired)."""
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
        headers = {"Authorization": f"Bearer {self._token()}"}
        return http.json_request(url, body, timeout=self.timeout, headers=headers)

    def reference(self, response) -> str:
        if response.status_code == 200:
            return response.json()["name"]
        raise self._error(response)

    def _error(self, response) -> ProviderError:
        transient = http.transient_for_status("fcm", response)
        if transient is not None:
            return transient
        error = _error_body(response)
        code = _error_code(error)
        detail = f"fcm {response.status_code} {code}: {error.get('message') or response.text[:200]}"
        if code in _DEAD_TOKEN or (code == "INVALID_ARGUMENT" and names_the_token(error)):
            return ProviderError(detail, permanent=True, address_invalid=True)
        if response.status_code == 401 and code != "THIRD_PARTY_AUTH_ERROR":
            return ProviderError(detail, permanent=False)
        return ProviderError(detail, permanent=True)


def _error_body(response) -> dict:
    """The ``error`` object of a Google API error answer (AIP-193), or {}."""
    try:
        error = response.json()["error"]
    except (ValueError, KeyError, TypeError):
        return {}
    return error if isinstance(error, dict) else {}


def _details(error: dict, type_url: str) -> list[dict]:
    return [d for d in error.get("details") or [] if isinstance(d, dict) and d.get("@type") == type_url]


def _error_code(error: dict) -> str:
    """FCM's ``errorCode`` when it gives one, else the canonical ``status`` (``INVALID_ARGUMENT``, …)."""
    codes = [d.get("errorCode") for d in _details(error, _FCM_ERROR) if d.get("errorCode")]
    return codes[0] if codes else str(error.get("status", ""))


def names_the_token(error: dict) -> bool:
    """True when an ``INVALID_ARGUMENT`` error is about the registration token, not the payload.

    ``error`` is the ``error`` object of the answer. A ``google.rpc.BadRequest``
    detail decides when it names fields (``message.token`` or not); without
    one, FCM's own message for a bad token does.
    """
    fields = [
        str(violation.get("field", ""))
        for detail in _details(error, _BAD_REQUEST)
        for violation in detail.get("fieldViolations") or []
        if isinstance(violation, dict)
    ]
    if fields:
        return "message.token" in fields
    return "registration token" in str(error.get("message", "")).lower()
