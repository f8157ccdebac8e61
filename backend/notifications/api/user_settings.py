"""A user's preferences (opt-outs per kind × channel, quiet hours, time zone, language) and push devices."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications import actions
from backend.notifications.api.errors import validation_response
from backend.notifications.api.parsers import json_object
from backend.notifications.api.serializers import (
    LanguageField,
    StrictCharField,
    StrictSerializer,
    TimeZoneField,
    language_code,
    time_zone_name,
)
from backend.notifications.models import Device, Kind, Preference, Recipient
from backend.notifications.providers.base import ProviderError
from backend.notifications.providers.http import check_public_url
from backend.notifications.providers.webpush import subscription_keys
from backend.notifications.quiet_hours import parse_wall_time

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


def _recipient(user_id: str) -> Recipient:
    recipient = Recipient.objects.filter(user_id=user_id).first()
    if recipient is None:
        raise NotFound(f"No user with id {user_id!r}.")
    return recipient


def _validated(request: Request, user_id: str, serializer: type[serializers.Serializer]) -> tuple[Recipient, dict]:
    """The user (404 unknown) and the request's JSON object validated by ``serializer`` (400 / 422)."""
    recipient = _recipient(user_id)
    validated = serializer(data=json_object(request))
    validated.is_valid(raise_exception=True)
    return recipient, validated.validated_data


class StrictBooleanField(serializers.BooleanField):
    """JSON true or false only (DRF would also take "no", 0, "off")."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            raise serializers.ValidationError("Must be true or false.")
        return data


class WallTimeField(serializers.TimeField):
    """A local wall time as ``HH:MM``, in Latin, Persian or Arabic-Indic digits (``quiet_hours.parse_wall_time``)."""

    def __init__(self, **kwargs):
        super().__init__(format="%H:%M", **kwargs)

    def to_internal_value(self, value):
        if not isinstance(value, str):
            raise serializers.ValidationError("Give the time as a string, HH:MM.")
        try:
            return parse_wall_time(value)
        except ValueError:
            raise serializers.ValidationError("Give the time as HH:MM on a 24-hour clock, e.g. 22:00.") from None


class QuietHoursSerializer(StrictSerializer):
    start = WallTimeField(help_text="Local wall time, 22:00 (۲۲:۰۰ and ٢٢:٠٠ are read too).")
    end = WallTimeField(help_text="Local wall time, 07:00.")

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if attrs["start"] == attrs["end"]:
            raise serializers.ValidationError({"end": ["Must differ from start (use null for no quiet hours)."]})
        return attrs


class PreferencesSerializer(StrictSerializer):
    """Fields left out stay as they are; ``channels`` changes only the kind × channel pairs it names."""

    language = LanguageField(required=False, max_length=35)

    def validate_language(self, value: str) -> str:
        return language_code(value)

    time_zone = TimeZoneField(required=False, max_length=64, validators=[time_zone_name])
    quiet_hours = QuietHoursSerializer(required=False, allow_null=True)
    channels = serializers.DictField(
        child=serializers.DictField(child=StrictBooleanField()),
        required=False,
        help_text='{"promo": {"email": false, "push": true}}',
    )


def preferences_document(recipient: Recipient) -> dict:
    """Everything the user chose, and what each kind allows: every channel it is sent by (``channels_by_kind``)."""
    chosen: dict[tuple[int, str], bool] = {
        (kind_id, channel): enabled
        for kind_id, channel, enabled in Preference.objects.filter(recipient=recipient).values_list(
            "kind_id", "channel", "enabled"
        )
    }
    kinds = list(Kind.objects.exclude(name=Kind.DIGEST).order_by("name"))
    sendable = actions.channels_by_kind(kinds)
    start, end = recipient.quiet_hours_start, recipient.quiet_hours_end
    return {
        "user_id": recipient.user_id,
        "language": recipient.language,
        "time_zone": recipient.time_zone,
        "quiet_hours": {"start": start.strftime("%H:%M"), "end": end.strftime("%H:%M")} if start and end else None,
        "kinds": {
            kind.name: {
                "category": kind.category,
                "opt_out_allowed": kind.opt_out_allowed,
                "channels": {channel: chosen.get((kind.pk, channel), True) for channel in sendable[kind.pk]},
            }
            for kind in kinds
        },
    }


class PreferencesView(APIView):
    @extend_schema(operation_id="get_preferences", responses={200: OpenApiResponse(description="The document"),
                                                              401: _ERROR, 404: _ERROR})  # fmt: skip
    def get(self, request: Request, user_id: str) -> Response:
        """The user's opt-outs per kind × channel, quiet hours, time zone and language."""
        return Response(preferences_document(_recipient(user_id)))

    @extend_schema(
        operation_id="put_preferences",
        request=PreferencesSerializer,
        responses={200: OpenApiResponse(description="The document"), 400: _ERROR, 401: _ERROR, 404: _ERROR,
                   422: _ERROR},
    )  # fmt: skip
    def put(self, request: Request, user_id: str) -> Response:
        """Set preferences; fields left out stay as they are. Security kinds cannot be turned off (422)."""
        recipient, data = _validated(request, user_id, PreferencesSerializer)
        kinds = {kind.name: kind for kind in Kind.objects.filter(name__in=data.get("channels", {}))}
        sendable = actions.channels_by_kind(kinds.values())
        problems = {}
        for name, channels in data.get("channels", {}).items():
            if name not in kinds:
                problems[f"channels.{name}"] = [f"Unknown kind {name!r}."]
                continue
            for channel, enabled in channels.items():
                try:
                    actions.check_preference(kinds[name], channel, enabled, sendable[kinds[name].pk])
                except actions.PreferenceRefused as exc:
                    problems[f"channels.{name}.{channel}"] = [str(exc)]
        if problems:
            return validation_response(problems)
        actions.update_preferences(recipient, data, kinds, by=actions.by_api_client(request.auth))
        return Response(preferences_document(recipient))


class DeviceSerializer(StrictSerializer):
    platform = serializers.ChoiceField(choices=Device.Platform.choices)
    token = StrictCharField(required=False, max_length=1024, help_text="FCM registration token (fcm).")
    subscription = serializers.DictField(
        required=False, help_text='Web Push: the browser\'s {"endpoint", "keys": {"p256dh", "auth"}}.'
    )

    def validate(self, attrs):
        attrs = super().validate(attrs)
        if attrs["platform"] == Device.Platform.FCM:
            if not attrs.get("token"):
                raise serializers.ValidationError({"token": ["Required for fcm devices."]})
            if "subscription" in attrs:
                raise serializers.ValidationError({"subscription": ["Only for webpush devices."]})
            attrs["subscription"] = {}
            return attrs
        sub = attrs.get("subscription") or {}
        endpoint, keys = sub.get("endpoint"), sub.get("keys")
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")) or len(endpoint) > 1024:
            raise serializers.ValidationError(
                {"subscription": ["Needs an http(s) endpoint of at most 1024 characters."]}
            )
        if not isinstance(keys, dict) or not all(isinstance(keys.get(k), str) and keys[k] for k in ("p256dh", "auth")):
            raise serializers.ValidationError({"subscription": ['Needs "keys": {"p256dh": …, "auth": …}.']})
        try:
            check_public_url(endpoint, resolve=False)
        except ProviderError as exc:
            raise serializers.ValidationError({"subscription": [str(exc)]}) from None
        try:
            checked = subscription_keys(keys["p256dh"], keys["auth"])
        except ValueError as exc:
            raise serializers.ValidationError({"subscription": [str(exc)]}) from None
        attrs["token"] = endpoint
        attrs["subscription"] = {"endpoint": endpoint, "keys": checked}
        return attrs


class UnregisterSerializer(StrictSerializer):
    token = StrictCharField(max_length=1024, help_text="The FCM token, or the Web Push subscription's endpoint.")


class DeviceUnregisterView(APIView):
    @extend_schema(
        operation_id="unregister_device",
        request=UnregisterSerializer,
        responses={200: OpenApiResponse(description="Disabled"), 400: _ERROR, 401: _ERROR, 404: _ERROR,
                   422: _ERROR},
    )  # fmt: skip
    def post(self, request: Request, user_id: str) -> Response:
        """The app signed out: push no more to this device (kept, disabled, for support; registering enables it)."""
        recipient, body = _validated(request, user_id, UnregisterSerializer)
        by = actions.by_api_client(request.auth)
        device = actions.unregister_device(recipient, body["token"], by)
        if device is None:
            raise NotFound(f"User {user_id!r} has no device with that token.")
        return Response(device_json(device))


def device_json(device: Device) -> dict:
    return {
        "platform": device.platform,
        "token": device.token,
        "last_seen_at": device.last_seen_at,
        "disabled_at": device.disabled_at,
        "disabled_reason": device.disabled_reason,
    }


class DevicesView(APIView):
    @extend_schema(operation_id="list_devices", responses={200: OpenApiResponse(description="Devices"), 404: _ERROR})
    def get(self, request: Request, user_id: str) -> Response:
        """The user's push devices, newest first, disabled ones included with the reason."""
        return Response([device_json(d) for d in _recipient(user_id).devices.all()])

    @extend_schema(
        operation_id="put_device",
        request=DeviceSerializer,
        responses={200: OpenApiResponse(description="Updated"), 201: OpenApiResponse(description="Registered"),
                   400: _ERROR, 401: _ERROR, 404: _ERROR, 422: _ERROR},
    )  # fmt: skip
    def put(self, request: Request, user_id: str) -> Response:
        """Register a push device (or refresh it: a token seen again is enabled again and moves to this user)."""
        recipient, body = _validated(request, user_id, DeviceSerializer)
        device, created = actions.register_device(recipient, **body)
        return Response(device_json(device), status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)
