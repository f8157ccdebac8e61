"""The delivery engine's models, one module per topic."""

from backend.notifications.models.breaker import BreakerEvent
from backend.notifications.models.client import ApiClient
from backend.notifications.models.kind import Category, Channel, Kind, Priority
from backend.notifications.models.notification import Attempt, DeadLetter, Notification, State, StateChange
from backend.notifications.models.recipient import Device, Recipient
from backend.notifications.models.template import TemplateVersion

__all__ = [
    "ApiClient",
    "Attempt",
    "BreakerEvent",
    "Category",
    "Channel",
    "DeadLetter",
    "Device",
    "Kind",
    "Notification",
    "Priority",
    "Recipient",
    "State",
    "StateChange",
    "TemplateVersion",
]
