"""Request and response shapes of /api/v1. Requests refuse unknown fields: nothing sent is silently dropped."""

import json
import zoneinfo
from functools import lru_cache

import phonenumbers
from django.conf.locale import LANG_INFO
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from backend.notifications.models import Attempt, Channel, Notification, Priority, StateChange

MAX_PARAMS_BYTES = 16 * 1024


@lru_cache(maxsize=1)
def _time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, naming them."""

    def validate(self, attrs):
        unknown = sorted(set(self.initial_data) - set(self.fields)) if isinstance(self.initial_data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


class SendRequestSerializer(StrictSerializer):
    user_id = serializers.CharField(max_length=128)
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
        parsed = parse_datetime(raw) if isinstance(raw, str) else None
        if parsed is not None and parsed.tzinfo is None:
            raise serializers.ValidationError({"send_at": ["Include a UTC offset or Z, e.g. 2026-12-01T09:00:00Z."]})
        return super().to_internal_value(data)

    def validate_params(self, value: dict) -> dict:
        if len(json.dumps(value, ensure_ascii=False).encode()) > MAX_PARAMS_BYTES:
            raise serializers.ValidationError(f"Params may be at most {MAX_PARAMS_BYTES} bytes of JSON.")
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


class NotificationSerializer(serializers.ModelSerializer):
    user_id = serializers.CharField(source="recipient.user_id")
    kind = serializers.CharField(source="kind.name")
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


class RecipientSerializer(StrictSerializer):
    """Contact data, replaced whole by PUT: a field left out is cleared or reset to its default."""

    user_id = serializers.CharField(read_only=True)
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    phone = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=32,
        help_text="International format; stored as E.164, e.g. +966501234567.",
    )
    language = serializers.CharField(required=False, default="en", max_length=8, help_text="e.g. en, ar, fa.")
    time_zone = serializers.CharField(required=False, default="UTC", max_length=64, help_text="IANA, e.g. Asia/Riyadh.")
    created_at = serializers.DateTimeField(read_only=True)
    updated_at = serializers.DateTimeField(read_only=True)

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
        return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)

    def validate_language(self, value: str) -> str:
        code = value.strip().lower()
        if code not in LANG_INFO or "-" in code:
            raise serializers.ValidationError(
                f"Unknown language code {value!r}; use an ISO 639-1 code such as en, ar or fa."
            )
        return code

    def validate_time_zone(self, value: str) -> str:
        if value not in _time_zones():
            raise serializers.ValidationError(f"Unknown time zone {value!r}; use an IANA name such as Asia/Riyadh.")
        return value
