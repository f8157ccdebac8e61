"""Fake SMS and push providers for the embedded demo: they log the message and accept it.

Real adapters (Twilio, Vonage, FCM, APNs) replace them through
``NOTIFY_SMS_PROVIDER`` / ``NOTIFY_PUSH_PROVIDER``.
"""

import logging
import uuid

from backend.notifications.providers.base import OutboundMessage, Provider, register

logger = logging.getLogger(__name__)


class _FakeProvider(Provider):
    def send(self, message: OutboundMessage) -> str:
        reference = f"{self.name}-{uuid.uuid4().hex[:12]}"
        logger.info("[%s] to %s: %s (ref %s)", self.name, message.to, message.text, reference)
        return reference


@register
class FakeSmsProvider(_FakeProvider):
    name = "fake-sms"
    channel = "sms"


@register
class FakePushProvider(_FakeProvider):
    name = "fake-push"
    channel = "push"
