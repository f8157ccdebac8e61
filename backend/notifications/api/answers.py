"""A send's answer body built as a plain dict: ``AcceptedSerializer``'s output without DRF's per-field work.

DRF walks 24 field objects per notification (attribute lookup, ``to_representation``, the
``None`` checks): about a third of a millisecond each, a third of a batch of 1,000's CPU
(README "Throughput: the send API"). ``accepted_dict`` writes the same keys, in the same order,
with the same values; ``tests/test_api_batch.py`` compares it with ``AcceptedSerializer`` for new,
duplicate, attempted and scheduled notifications. A field added to the serializer must be added here.
"""

from datetime import UTC, datetime, tzinfo
from functools import lru_cache

from django.utils import timezone

from backend.notifications import masking
from backend.notifications.actions import Accepted
from backend.notifications.api.serializers import AttemptSerializer
from backend.notifications.models import Notification, StateChange

_ATTEMPT = AttemptSerializer()


def moment(value: datetime | None, zone: tzinfo) -> str | None:
    """``value`` as DRF's ``DateTimeField`` writes it: ISO 8601 in ``zone`` (the current time zone), ``Z`` for UTC.

    A value in UTC (``datetime.UTC``: every time this project stamps, and every one read back)
    is written once per zone and remembered: a batch's new rows share their few instants (created,
    queued, the history's), each written a thousand times. Any other is written each time: two
    readings of one wall-clock time in a zone's DST fold compare equal and hash alike (PEP 495), an
    hour apart.
    """
    if value is None:
        return None
    return _remembered(value, zone) if value.tzinfo is UTC else _written(value, zone)


def _written(value: datetime, zone: tzinfo) -> str:
    text = value.astimezone(zone).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


_remembered = lru_cache(maxsize=256)(_written)


def _text(value) -> str | None:
    return None if value is None else str(value)


def _change(change: StateChange, zone: tzinfo) -> dict:
    return {
        "from_state": _text(change.from_state),
        "to_state": _text(change.to_state),
        "reason": _text(change.reason),
        "at": moment(change.at, zone),
    }


def accepted_dict(
    notification: Notification, history: list[StateChange], attempts: list, duplicate: bool, zone: tzinfo | None = None
) -> dict:
    """``AcceptedSerializer().to_representation`` of ``notification`` with this ``history`` and these ``attempts``.

    ``history`` and ``attempts`` are what the serializer would read from ``state_changes`` and
    ``attempts`` (the batch passes them as accepted, or as prefetched for an original). ``zone`` is
    the current time zone (read here when not given).
    """
    zone = zone or timezone.get_current_timezone()
    return {
        "id": _text(notification.pk),
        "idempotency_key": _text(notification.idempotency_key),
        "user_id": _text(notification.recipient.user_id),
        "kind": _text(notification.kind.name),
        "channel": _text(notification.channel),
        "priority": _text(notification.priority),
        "params": masking.masked_params(notification.kind, notification.params),
        "state": _text(notification.state),
        "reason": _text(notification.reason),
        "send_at": moment(notification.send_at, zone),
        "template": str(notification.template_version) if notification.template_version_id else None,
        "preview": _text(notification.preview),
        "provider": _text(notification.provider),
        "provider_ref": _text(notification.provider_ref),
        "attempt_count": None if notification.attempt_count is None else int(notification.attempt_count),
        "last_error": _text(notification.last_error),
        "created_at": moment(notification.created_at, zone),
        "queued_at": moment(notification.queued_at, zone),
        "sending_at": moment(notification.sending_at, zone),
        "sent_at": moment(notification.sent_at, zone),
        "failed_at": moment(notification.failed_at, zone),
        "state_history": [_change(change, zone) for change in history],
        "attempts": [_ATTEMPT.to_representation(attempt) for attempt in attempts],
        "duplicate": duplicate,
    }


def answered(accepted: Accepted, zone: tzinfo | None = None) -> dict:
    """The send's answer body for ``accepted``: a new notification as accepted, a duplicate's original as read.

    A free worker claims a new row the instant it commits, before the answer is built; read back, it
    would say ``sending`` or even ``sent``. So a new one is answered from the object in memory, with
    the history written on acceptance and no attempts (README: the 202 says queued, scheduled or
    suppressed). A duplicate's original must come with its history and attempts prefetched. ``zone``
    is the current time zone: a batch reads it once (it sits behind asgiref's ``Local``, slow enough
    to matter a thousand times a batch).
    """
    notification = accepted.notification
    if accepted.history or not accepted.duplicate:
        return accepted_dict(notification, list(accepted.history), [], accepted.duplicate, zone)
    history, attempts = list(notification.state_changes.all()), list(notification.attempts.all())
    return accepted_dict(notification, history, attempts, accepted.duplicate, zone)
