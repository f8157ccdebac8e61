"""The delivery engine's models, one module per topic."""

from backend.notifications.models.breaker import BreakerEvent
from backend.notifications.models.client import ApiClient
from backend.notifications.models.erasure import Erasure
from backend.notifications.models.kind import Category, Channel, Kind, OverLimit, Priority
from backend.notifications.models.metric_counter import MetricCounter
from backend.notifications.models.notification import (
    MADE_BY_CAMPAIGN,
    Attempt,
    DeadLetter,
    Notification,
    State,
    StateChange,
    VelocityAlarm,
)
from backend.notifications.models.receipt import Receipt
from backend.notifications.models.recipient import Device, Preference, Recipient
from backend.notifications.models.staff import StaffContact
from backend.notifications.models.template import TemplateVersion
from backend.notifications.models.template_history import TemplateEvent
from backend.notifications.models.unsubscribe import UnsubscribeToken

__all__ = [
    "MADE_BY_CAMPAIGN",
    "ApiClient",
    "Attempt",
    "BreakerEvent",
    "Category",
    "Channel",
    "DeadLetter",
    "Device",
    "Erasure",
    "Kind",
    "MetricCounter",
    "Notification",
    "OverLimit",
    "Preference",
    "Priority",
    "Receipt",
    "Recipient",
    "StaffContact",
    "State",
    "StateChange",
    "TemplateEvent",
    "TemplateVersion",
    "UnsubscribeToken",
    "VelocityAlarm",
]
