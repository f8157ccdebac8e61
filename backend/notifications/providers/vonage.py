"""SMS through the Vonage (Nexmo) SMS API (the backup SMS provider).

``POST {base_url}/sms/json`` with ``api_key``, ``api_secret``, ``from``,
``to`` (digits, no +), ``text``, ``type=unicode`` for UCS-2 text and
``client-ref`` (our notification id). The answer is HTTP 200 with a status
per message part. https://developer.vonage.com/en/api/sms
Status codes: https://developer.vonage.com/en/messaging/sms/guides/troubleshooting-sms
"""

from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

_TRANSIENT = {"1": "throttled", "5": "internal error", "9": "partner quota violation", "10": "too many binds"}
_DEAD_NUMBER = {"6": "invalid message (unroutable number)", "33": "number de-activated"}
_BARRED = {"7": "number barred (opted out or blocked)", "29": "non-whitelisted destination"}
# Our account or configuration: retrying (then a dead letter to replay once fixed) beats failing for good.
_ACCOUNT = {"4": "invalid credentials", "8": "partner account barred", "11": "account not enabled for HTTP",
            "14": "invalid signature", "32": "signature and API secret disallowed"}  # fmt: skip


def _is_gsm7(text: str) -> bool:
    from backend.notifications import sms_encoding

    return sms_encoding.encoding_and_segments(text)[0] == sms_encoding.GSM7


@register
class VonageProvider(Provider):
    name = "vonage"
    channel = "sms"

    def send(self, message: OutboundMessage) -> str:
        return self.reference(http.send(self.request(message)))

    def request(self, message: OutboundMessage) -> http.Request:
        """The SMS API call for ``message``: its form, the credentials in it as the API asks."""
        options = self.config.options
        form = {
            "api_key": options["api_key"],
            "api_secret": options["api_secret"],
            "from": options["from"],
            "to": message.to.lstrip("+"),
            "text": message.text,
            "client-ref": message.notification_id,
        }
        if not _is_gsm7(message.text):
            form["type"] = "unicode"
        if options.get("callback"):
            form["callback"] = options["callback"]
        url = f"{options.get('base_url', 'https://rest.nexmo.com').rstrip('/')}/sms/json"
        return http.form_request(url, form, timeout=self.timeout)

    def reference(self, response) -> str:
        transient = http.transient_for_status("vonage", response)
        if transient is not None:
            raise transient
        try:
            parts = response.json()["messages"]
        except (ValueError, KeyError, TypeError):
            raise ProviderError(f"vonage: unreadable answer {response.text[:200]!r}", permanent=False) from None
        failed = next((part for part in parts if part.get("status") != "0"), None)
        if failed is None:
            return parts[0]["message-id"]
        raise self._error(failed)

    def _error(self, part: dict) -> ProviderError:
        status = str(part.get("status"))
        detail = f"vonage status {status}: {part.get('error-text', '')}".strip()
        if status in _TRANSIENT or status in _ACCOUNT:
            return ProviderError(detail, permanent=False)
        if status in _DEAD_NUMBER:
            return ProviderError(detail, permanent=True, address_invalid=True)
        return ProviderError(detail, permanent=True)
