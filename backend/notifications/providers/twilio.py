"""SMS through the Twilio Messages REST API (the primary SMS provider).

``POST {base_url}/2010-04-01/Accounts/{account_sid}/Messages.json``, form
encoded, HTTP basic auth (account SID, auth token); 201 with ``{"sid": "SM…"}``
on acceptance. https://www.twilio.com/docs/messaging/api/message-resource#create-a-message-resource
Error codes: https://www.twilio.com/docs/api/errors
Options: ``base_url``, ``account_sid``, ``auth_token``, ``from`` (or
``messaging_service_sid``), ``status_callback`` (delivery receipts).
"""

from backend.notifications.providers import http
from backend.notifications.providers.base import OutboundMessage, Provider, ProviderError, register

# Documented codes that say the number itself cannot receive: the number is disabled.
_DEAD_NUMBER = {
    21211: "invalid 'To' number",
    21214: "'To' number cannot be reached",
    21612: "'To' number is not reachable via SMS",
    21614: "'To' number is not a mobile number",
}
# The recipient replied STOP: permanent, but the number is fine.
_OPTED_OUT = {21610: "recipient opted out (replied STOP)"}


@register
class TwilioProvider(Provider):
    name = "twilio"
    channel = "sms"

    def send(self, message: OutboundMessage) -> str:
        return self.reference(http.send(self.request(message)))

    def request(self, message: OutboundMessage) -> http.Request:
        """The Messages API call for ``message``: its form, with the account's basic auth."""
        options = self.config.options
        url = f"{options.get('base_url', 'https://api.twilio.com').rstrip('/')}/2010-04-01/Accounts/"
        url += f"{options['account_sid']}/Messages.json"
        form = {"To": message.to, "Body": message.text}
        if options.get("messaging_service_sid"):
            form["MessagingServiceSid"] = options["messaging_service_sid"]
        else:
            form["From"] = options["from"]
        if options.get("status_callback"):
            form["StatusCallback"] = options["status_callback"]
        auth = http.basic_auth(options["account_sid"], options["auth_token"])
        return http.form_request(url, form, timeout=self.timeout, headers={"Authorization": auth})

    def reference(self, answer) -> str:
        if answer.status_code in (200, 201):
            return answer.json()["sid"]
        raise self._error(answer)

    def _error(self, response) -> ProviderError:
        transient = http.transient_for_status("twilio", response)
        if transient is not None:
            return transient
        try:
            body = response.json()
        except ValueError:
            body = {}
        code = body.get("code")
        detail = f"twilio {code}: {body.get('message', response.text[:200])}"
        if code in _DEAD_NUMBER:
            return ProviderError(detail, permanent=True, address_invalid=True)
        if code in _OPTED_OUT:
            return ProviderError(detail, permanent=True)
        if response.status_code in (401, 403):
            # Our credentials, not the message: retry (and dead-letter) rather than fail the message for good.
            return ProviderError(detail, permanent=False)
        return ProviderError(detail, permanent=True)
