"""``POST /api/v1/sms/segments``: how a text travels as SMS and what it costs, before anything is sent.

The same calculation the template editor shows (``sms_encoding.analyze`` and
``pricing``), for services that want to price a message themselves.
"""

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications import pricing
from backend.notifications.api.closed_sets import ClosedSetField
from backend.notifications.api.errors import validation_response
from backend.notifications.api.parsers import json_object
from backend.notifications.api.serializers import StrictSerializer
from backend.notifications.sms_encoding import GSM7, UCS2, SmsAnalysis, analyze

# Python characters (code points). 10,000 GSM-7 characters are already ~66 segments.
MAX_TEXT = 10_000

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


class StrictCharField(serializers.CharField):
    """A string, kept exactly as sent: DRF's ``CharField`` would trim it and accept numbers.

    DRF still refuses a lone UTF-16 surrogate (JSON can carry ``"\\ud83d"``):
    it is no character, cannot be sent, and could not be encoded in the answer.
    """

    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def _priced_providers() -> tuple[str, ...]:
    return pricing.price_list().providers


class ProviderField(ClosedSetField, StrictCharField):
    """An SMS provider; the schema lists those the price list names (``pricing.known_provider`` checks)."""

    values = staticmethod(_priced_providers)


class SmsTextSerializer(StrictSerializer):
    text = StrictCharField(
        max_length=MAX_TEXT,
        allow_blank=True,
        help_text="The message exactly as it will be sent; whitespace counts.",
    )
    to = StrictCharField(
        required=False,
        max_length=32,
        help_text="Destination in international format (E.164, e.g. +966501234567): adds the price.",
    )
    provider = ProviderField(
        required=False,
        max_length=32,
        help_text="Provider to price with; default: the first listed for the destination country.",
    )


class Ucs2CharacterSerializer(serializers.Serializer):
    char = serializers.CharField()
    index = serializers.IntegerField(help_text="Index in the text as a sequence of code points (not UTF-16 units).")
    replacement = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        help_text='GSM-7 look-alike; "" for an invisible character that can go; null for none.',
    )


class SmsPriceSerializer(serializers.Serializer):
    amount = serializers.CharField(help_text="segments × per_segment, a decimal string, e.g. 0.0900.")
    currency = serializers.CharField(help_text="ISO 4217.")
    country = serializers.CharField(help_text="ISO 3166-1 alpha-2, from the number.")
    provider = serializers.CharField()
    per_segment = serializers.CharField(help_text="Price of one segment, a decimal string.")


# The answer's shape, for the schema only. The view builds the body with plain dicts: an Arabic text lists
# every letter in ucs2_characters, and serializing through DRF fields took 12× as long (1.2 ms against 0.1 ms
# for 1,000 characters, more than the analysis itself) on the live-pricing path the editor calls per keystroke.
class SmsSegmentsSerializer(serializers.Serializer):
    """How the text travels as SMS and, with ``to``, what one message costs."""

    encoding = serializers.ChoiceField(choices=[GSM7, UCS2])
    units = serializers.IntegerField(help_text="Length in septets (GSM-7) or UTF-16 code units (UCS-2).")
    units_left = serializers.IntegerField(help_text="Units that still fit in the last segment.")
    segments = serializers.IntegerField(help_text="What the provider bills; an empty text is 1.")
    parts = serializers.ListField(child=serializers.CharField(), help_text="The text of each segment.")
    ucs2_characters = Ucs2CharacterSerializer(many=True, help_text="Every character that forces UCS-2.")
    price = SmsPriceSerializer(allow_null=True, help_text="Null unless `to` is given.")


def _price(quote: pricing.Quote | None) -> dict | None:
    if quote is None:
        return None
    return {
        "amount": pricing.decimal_str(quote.amount),
        "currency": quote.currency,
        "country": quote.country,
        "provider": quote.provider,
        "per_segment": pricing.decimal_str(quote.per_segment),
    }


def _body(analysis: SmsAnalysis, quote: pricing.Quote | None) -> dict:
    return {
        "encoding": analysis.encoding,
        "units": analysis.units,
        "units_left": analysis.units_left,
        "segments": analysis.segments,
        "parts": list(analysis.parts),
        "ucs2_characters": [
            {"char": char, "index": index, "replacement": replacement}
            for char, index, replacement in analysis.ucs2_characters
        ],
        "price": _price(quote),
    }


def _quote(segments: int, to: str | None, provider: str | None) -> pricing.Quote | None:
    """The price of one message, or None without a destination; a named provider is checked either way."""
    if provider is not None:
        provider = pricing.known_provider(provider)
    if to is None:
        return None
    return pricing.price_message(segments, to, provider)


class SmsSegmentsView(APIView):
    @extend_schema(
        operation_id="sms_segments",
        request=SmsTextSerializer,
        responses={200: SmsSegmentsSerializer, 400: _ERROR, 401: _ERROR, 422: _ERROR},
        examples=[
            OpenApiExample(
                "Arabic to Saudi Arabia",
                request_only=True,
                value={"text": "رمز التحقق: 4821", "to": "+966501234567"},
            )
        ],
    )
    def post(self, request: Request) -> Response:
        """Encoding (3GPP TS 23.038), length, segments, parts, the characters forcing UCS-2, and the price."""
        serializer = SmsTextSerializer(data=json_object(request))
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        analysis = analyze(data["text"])
        try:
            quote = _quote(analysis.segments, data.get("to"), data.get("provider"))
        except pricing.UnknownProvider as exc:
            return validation_response({"provider": [str(exc)]})
        except pricing.PricingError as exc:  # an invalid number, or no price for its country
            return validation_response({"to": [str(exc)]})
        return Response(_body(analysis, quote))
