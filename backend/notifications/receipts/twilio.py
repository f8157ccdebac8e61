"""Twilio's status callbacks: which configured account signed one, and what it says.

Twilio posts ``MessageSid``, ``MessageStatus`` (queued, sending, sent, delivered, undelivered,
failed, read …) and, for the last two, ``ErrorCode`` to the message's ``StatusCallback`` URL
(https://www.twilio.com/docs/messaging/guides/track-outbound-message-status), signed with the
account's auth token (``signatures.py``).
Error codes: https://www.twilio.com/docs/api/errors (one page per code, e.g. /30003).
"""

from collections.abc import Mapping

from backend.notifications.models import Receipt
from backend.notifications.providers.config import providers_config
from backend.notifications.receipts.apply import ProviderReceipt, ReceiptError
from backend.notifications.receipts.signatures import twilio_signature_matches

_OUTCOMES = {
    "delivered": Receipt.Outcome.DELIVERED,
    "read": Receipt.Outcome.DELIVERED,
    "undelivered": Receipt.Outcome.UNDELIVERED,
    "failed": Receipt.Outcome.UNDELIVERED,
}  # every other status (queued, accepted, sending, sent …) says the message is still on its way
MEANINGS = {
    "30001": "Queue overflow",
    "30002": "Account suspended",
    "30003": "Unreachable destination handset",
    "30004": "Message blocked",
    "30005": "Unknown destination handset",
    "30006": "Landline or unreachable carrier",
    "30007": "Message filtered (carrier filtering)",
    "30008": "Unknown error",
    "30009": "Missing segment",
    "30010": "Message price exceeds max price",
    "30034": "Message from an unregistered number (US A2P 10DLC)",
}
# The number itself cannot receive (handset unreachable or unknown, a landline): disabled as the
# adapter does for 21211 & co. at send time. Carrier filtering (30007, 30034) is about our sender or
# content, not the number, and leaves it alone.
DEAD_NUMBER = frozenset({"30003", "30005", "30006"})


def signing_providers(url: str, params: list[tuple[str, str]], signature: str) -> list[str]:
    """The configured Twilio providers whose auth token signed this request (usually one, or none)."""
    return [
        config.name
        for config in providers_config().providers.values()
        if config.type == "twilio"
        and config.option("auth_token")
        and twilio_signature_matches(str(config.option("auth_token")), url, params, signature)
    ]


def read(form: Mapping[str, str]) -> ProviderReceipt:
    """One status callback's form fields as a ``ProviderReceipt``; ReceiptError when one is missing."""
    reference, status = form.get("MessageSid", "").strip(), form.get("MessageStatus", "").strip().lower()
    if not reference or not status:
        raise ReceiptError("A Twilio status callback names MessageSid and MessageStatus.")
    code = form.get("ErrorCode", "").strip()
    outcome = _OUTCOMES.get(status, Receipt.Outcome.SENT)
    return ProviderReceipt(
        provider_ref=reference, status=status, outcome=outcome, code=code, meaning=MEANINGS.get(code, ""),
        address_dead=outcome == Receipt.Outcome.UNDELIVERED and code in DEAD_NUMBER,
    )  # fmt: skip
