"""Request and response shapes of /api/v1. Requests refuse unknown fields: nothing sent is silently dropped."""

import json
import re
import unicodedata
from datetime import timedelta

import phonenumbers
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from backend.notifications import locales, masking
from backend.notifications.api.closed_sets import ClosedSetField
from backend.notifications.api.parsers import nesting_depth
from backend.notifications.models import Attempt, Channel, Notification, Priority, StateChange
from backend.notifications.rendering import BIDI_CONTROLS

MAX_PARAMS_BYTES = 16 * 1024
# Deeper params parsed, then failed where they were walked again (rendering, the response): a 500.
MAX_PARAMS_DEPTH = 32
MAX_USER_ID = 128
# Recipient attributes (segment filters): a flat object, small enough to sit in every recipient row.
MAX_ATTRIBUTES_BYTES = 4 * 1024
# A key starts with a letter (JSON paths read "7" as an array index) and holds no "__" (Django's lookup separator).
ATTRIBUTE_KEY = re.compile(r"(?!.*__)[A-Za-z][A-Za-z0-9_.-]{0,63}")
ATTRIBUTE_KEY_RULE = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter, without '__'"
# Larger integers lose precision in a double; segment filters also use it as the open end of a range.
MAX_ATTRIBUTE_NUMBER = 2**53
# How far ahead a send may be scheduled: further is almost always a unit mistake (ms for s).
MAX_SCHEDULE_AHEAD = timedelta(days=366)


def language_code(value: str) -> str:
    """A known ISO 639 language code, lower-cased, from it or a locale tag (``ar-SA`` → ``ar``).

    ``locales.language_of`` reads it. Raises ValidationError.
    """
    code = locales.language_of(value)
    if code is None:
        raise serializers.ValidationError(
            f"Unknown language code {value!r}; use an ISO 639-1 code such as en, ar or fa (ar-SA is read as ar)."
        )
    return code


def time_zone_name(value: str) -> str:
    """An IANA time zone name; raises ValidationError."""
    if value not in locales.time_zone_names():
        raise serializers.ValidationError(f"Unknown time zone {value!r}; use an IANA name such as Asia/Riyadh.")
    return value


def user_id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a user id (None when it can): the one rule for the URL and the body."""
    if not value:
        return "May not be blank."
    if len(value) > MAX_USER_ID:
        return f"At most {MAX_USER_ID} characters."
    if value != value.strip():
        return "May not start or end with spaces."
    if "\ufffd" in value or any(unicodedata.category(c) in ("Cc", "Cs") for c in value):
        return "May not contain control characters or invalid UTF-8."
    if BIDI_CONTROLS.intersection(value):
        # An override (U+202E) would make one id display as another in the admin and in logs.
        return "May not contain bidirectional control characters."
    return None


class StrictCharField(serializers.CharField):
    """A CharField that takes only JSON strings (DRF would turn 1 into "1" and true into "True")."""

    default_error_messages = {"not_a_string": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("not_a_string")
        return super().to_internal_value(data)


class LanguageField(ClosedSetField, StrictCharField):
    """A language code; the schema lists every one the server accepts (``locales.language_codes``)."""

    values = staticmethod(locales.language_codes)


class TimeZoneField(ClosedSetField, StrictCharField):
    """An IANA time zone; the schema lists every one the server accepts (``locales.time_zone_names``)."""

    values = staticmethod(locales.time_zone_names)


class UserIdField(StrictCharField):
    """A user id as the company's own systems spell it: kept exactly, never trimmed."""

    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=False, max_length=MAX_USER_ID, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        problem = user_id_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value


def bounded_params(value: dict) -> dict:
    """``value`` when it nests at most ``MAX_PARAMS_DEPTH`` levels and is at most ``MAX_PARAMS_BYTES`` of JSON (UTF-8).

    Raises ``ValidationError`` (a 422 on the field) otherwise: every request that carries params.
    """
    if nesting_depth(value) > MAX_PARAMS_DEPTH:
        raise serializers.ValidationError(f"Params may nest at most {MAX_PARAMS_DEPTH} levels deep.")
    if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_PARAMS_BYTES:
        raise serializers.ValidationError(f"Params may be at most {MAX_PARAMS_BYTES} bytes of JSON.")
    return value


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, and read-only ones, naming them (also when nested)."""

    read_only_messages: dict[str, str] = {}

    def to_internal_value(self, data):
        if isinstance(data, dict):
            problems = {}
            for name in sorted(data):
                field = self.fields.get(name)
                if field is None:
                    problems[name] = ["Unknown field."]
                elif field.read_only:
                    problems[name] = [self.read_only_messages.get(name, "Read-only: leave it out.")]
            if problems:
                raise serializers.ValidationError(problems)
        return super().to_internal_value(data)


# Named as the schema's readers know them: "SendRequest", not drf-spectacular's "SendRequestRequest".
@extend_schema_serializer(component_name="Send")
class SendRequestSerializer(StrictSerializer):
    user_id = UserIdField()
    kind = serializers.SlugField(max_length=64)
    params = serializers.DictField(required=False, default=dict)
    channel = serializers.ChoiceField(choices=Channel.choices, default=None, allow_null=True)
    priority = serializers.ChoiceField(
        choices=Priority.choices, default=None, allow_null=True, help_text="Defaults to the kind's priority."
    )
    send_at = serializers.DateTimeField(
        default=None, allow_null=True, help_text="ISO 8601 with a UTC offset, e.g. 2026-12-01T09:00:00+03:00."
    )

    def to_internal_value(self, data):
        # DRF would silently read a naive time in the server's zone; the caller must say which instant.
        raw = data.get("send_at") if isinstance(data, dict) else None
        try:
            parsed = parse_datetime(raw) if isinstance(raw, str) else None
        except ValueError:
            raise serializers.ValidationError({"send_at": ["Not a real date and time (e.g. February 30)."]}) from None
        if parsed is not None and parsed.tzinfo is None:
            raise serializers.ValidationError({"send_at": ["Include a UTC offset or Z, e.g. 2026-12-01T09:00:00Z."]})
        return super().to_internal_value(data)

    def validate_params(self, value: dict) -> dict:
        return bounded_params(value)

    def validate_send_at(self, value):
        if value is not None and value > timezone.now() + MAX_SCHEDULE_AHEAD:
            raise serializers.ValidationError("May be at most 366 days ahead.")
        return value


class StateChangeSerializer(serializers.ModelSerializer):
    class Meta:
        model = StateChange
        fields = ["from_state", "to_state", "reason", "at"]


class AttemptSerializer(serializers.ModelSerializer):
    class Meta:
        model = Attempt
        fields = [
            "number", "provider", "started_at", "latency_ms", "result", "error", "provider_ref",
            "sms_encoding", "sms_segments", "cost", "currency",
        ]  # fmt: skip


@extend_schema_field(OpenApiTypes.OBJECT)
class MaskedParamsField(serializers.Field):
    """A notification's params as readers may see them: each param its kind declares secret is ``••••••``."""

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, value: Notification) -> dict:
        return masking.masked_params(value.kind, value.params)


class NotificationSerializer(serializers.ModelSerializer):
    user_id = serializers.CharField(source="recipient.user_id")
    kind = serializers.CharField(source="kind.name")
    params = MaskedParamsField(help_text="As sent, with each secret param (an OTP code) shown as ••••••.")
    template = serializers.SerializerMethodField()
    state_history = StateChangeSerializer(source="state_changes", many=True)
    attempts = AttemptSerializer(many=True)

    class Meta:
        model = Notification
        fields = [
            "id",
            "idempotency_key",
            "user_id",
            "kind",
            "channel",
            "priority",
            "params",
            "state",
            "reason",
            "send_at",
            "template",
            "preview",
            "provider",
            "provider_ref",
            "attempt_count",
            "last_error",
            "created_at",
            "queued_at",
            "sending_at",
            "sent_at",
            "failed_at",
            "state_history",
            "attempts",
        ]

    def get_template(self, obj: Notification) -> str | None:
        return str(obj.template_version) if obj.template_version_id else None


class AcceptedSerializer(NotificationSerializer):
    duplicate = serializers.BooleanField(help_text="True when this is the original of an earlier request.")

    class Meta(NotificationSerializer.Meta):
        fields = [*NotificationSerializer.Meta.fields, "duplicate"]


def attributes_problem(value: object) -> str | None:
    """Why ``value`` cannot be a recipient's ``attributes`` (None when it can).

    Accepted: a JSON object whose keys are 1–64 characters of ``[A-Za-z0-9_.-]``,
    starting with a letter and without ``__`` (``ATTRIBUTE_KEY``),
    and whose values are strings or numbers within ±2**53 (exact in a double),
    at most ``MAX_ATTRIBUTES_BYTES`` (4 KiB) as compact UTF-8 JSON.
    Refused: nesting (lists, objects), and ``true``/``false``/``null``, which a
    segment filter could not tell from missing or from ``1``/``0``: send
    ``"yes"`` or ``1`` instead.
    """
    if not isinstance(value, dict):
        return 'Must be a JSON object of strings and numbers, e.g. {"plan": "gold", "orders": 7}.'
    for key, item in value.items():
        if not ATTRIBUTE_KEY.fullmatch(key):
            return f"Key {key[:80]!r}: use {ATTRIBUTE_KEY_RULE}."
        problem = _attribute_value_problem(item)
        if problem:
            return f"{key}: {problem}"
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_ATTRIBUTES_BYTES:
        return f"At most {MAX_ATTRIBUTES_BYTES} bytes of JSON; these are {size}."
    return None


def _attribute_value_problem(item: object) -> str | None:
    if isinstance(item, bool) or item is None:
        return 'true, false and null are not accepted; use a string or a number (e.g. "yes" or 1).'
    if isinstance(item, str):
        return None
    if isinstance(item, int | float):
        return None if abs(item) <= MAX_ATTRIBUTE_NUMBER else "Numbers must lie between -2**53 and 2**53."
    return "Must be a string or a number, not a list or an object: attributes are flat."


@extend_schema_field(
    {
        "type": "object",
        "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "example": {"plan": "gold", "orders": 7},
    }
)
class AttributesField(serializers.Field):
    """A recipient's flat attributes; the rules are ``attributes_problem``'s."""

    def to_internal_value(self, data):
        problem = attributes_problem(data)
        if problem:
            raise serializers.ValidationError(problem)
        return data

    def to_representation(self, value):
        return value


class RecipientSerializer(StrictSerializer):
    """Contact data, replaced whole by PUT: a field left out is cleared or reset to its default."""

    user_id = serializers.CharField(read_only=True)
    email = serializers.EmailField(required=False, allow_blank=True, default="", max_length=254)
    phone = StrictCharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=32,
        help_text="International format; stored as E.164, e.g. +966501234567.",
    )
    language = LanguageField(
        required=False, default="en", max_length=35, help_text="e.g. en, ar, fa; a locale tag (ar-SA) is read as ar."
    )
    time_zone = TimeZoneField(required=False, default="UTC", max_length=64, help_text="IANA, e.g. Asia/Riyadh.")
    attributes = AttributesField(
        required=False,
        default=dict,
        help_text="Flat object of strings and numbers for segment filters, at most 4 KiB of JSON.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

    read_only_messages = {"user_id": "The user id is taken from the URL; leave it out."}

    def validate(self, attrs):
        if isinstance(self.initial_data, dict) and not self.initial_data:
            raise serializers.ValidationError(
                {"body": ["Send the contact data: PUT replaces the whole record, so an empty body would erase it."]}
            )
        return super().validate(attrs)

    def validate_phone(self, value: str) -> str:
        if not value:
            return ""
        if not value.strip().startswith("+"):
            raise serializers.ValidationError(
                "Give the number in international format, starting with + and the country code."
            )
        try:
            number = phonenumbers.parse(value, None)
        except phonenumbers.NumberParseException as exc:
            raise serializers.ValidationError(f"Not a phone number: {exc}.") from None
        if not phonenumbers.is_valid_number(number):
            raise serializers.ValidationError("Not a valid phone number for its country.")
        if number.extension:
            raise serializers.ValidationError("An extension cannot receive SMS; give the number without it.")
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)

    def validate_language(self, value: str) -> str:
        return language_code(value)

    def validate_time_zone(self, value: str) -> str:
        return time_zone_name(value)


@extend_schema_serializer(component_name="BatchItem")
class BatchItemSerializer(SendRequestSerializer):
    """One send of a batch: the body of ``POST /api/v1/notifications`` plus its own idempotency key."""

    idempotency_key = StrictCharField(
        max_length=255,
        help_text="As the single send's Idempotency-Key header: a stable name of the event, 1 to 255 characters.",
    )


@extend_schema_serializer(component_name="Batch")
class BatchRequestSerializer(serializers.Serializer):
    """``POST /api/v1/notifications/batch``: 1 to 1,000 sends (schema only; the view reads items one by one)."""

    items = BatchItemSerializer(many=True, help_text="1 to 1,000 sends, each answered in its own result.")


@extend_schema_field(
    {
        "oneOf": [
            {"$ref": "#/components/schemas/Accepted"},
            {
                "type": "object",
                "properties": {
                    "error": {"type": "string"},
                    "message": {"type": "string"},
                    "fields": {
                        "type": "object",
                        "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    },
                },
                "required": ["error", "message"],
            },
        ]
    }
)
class BatchBodyField(serializers.JSONField):
    """A batch item's answer body: the single send's, the notification or the error."""


class BatchResultSerializer(serializers.Serializer):
    status = serializers.IntegerField(
        help_text="What the single send would have answered: 202 new, 200 duplicate, 422 refused, 503 retry later."
    )
    body = BatchBodyField(help_text="The single send's body for that status.")


class BatchResponseSerializer(serializers.Serializer):
    accepted = serializers.IntegerField(help_text="Items stored as new notifications (status 202).")
    duplicates = serializers.IntegerField(help_text="Items whose key was already used for the same request (200).")
    errors = serializers.IntegerField(help_text="Items refused (422) or to retry later (503); nothing stored for them.")
    results = BatchResultSerializer(many=True, help_text="One per item, in the order of the request.")
