"""String fields whose values form a closed set the server knows: the OpenAPI schema enumerates them.

A field mixes in ``ClosedSetField`` and names where its values come from (``values``); the
schema extension below turns that into ``enum`` when the schema is generated, so a price list
read from ``NOTIFY_SMS_PRICES`` is read then, not at import. Validation stays the field's own
(its validators give the person-readable 400); the enum tells callers and fuzzers what is valid.
"""

from collections.abc import Iterable

from drf_spectacular.extensions import OpenApiSerializerFieldExtension


class ClosedSetField:
    """Mixin for a serializer field; subclasses set ``values`` to a function returning the set."""

    @staticmethod
    def values() -> Iterable[str]:
        raise NotImplementedError


class ClosedSetFieldExtension(OpenApiSerializerFieldExtension):
    target_class = ClosedSetField
    match_subclasses = True

    def map_serializer_field(self, auto_schema, direction) -> dict:
        return {"type": "string", "enum": sorted(self.target.values())}
