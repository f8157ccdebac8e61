"""Request and response shapes of /api/v1/campaigns. Requests refuse unknown fields, like the rest of /api/v1."""

from datetime import time

from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from backend.notifications import masking
from backend.notifications.api.serializers import (
    StrictCharField,
    StrictSerializer,
    UserIdField,
    bounded_params,
)
from backend.notifications.models import Category, Channel, Kind, TemplateVersion
from campaigns import ledger as ledgers
from campaigns import validation
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, ScheduleMode, Segment

# Users listed in the body of one request; a bigger audience is an uploaded list segment.
MAX_INLINE_USER_IDS = 10_000
# Campaigns in one page of GET /api/v1/campaigns.
DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT = 20, 100
# One name in the schema for the state of a campaign and of a list row (settings' ENUM_NAME_OVERRIDES).
CAMPAIGN_STATES = Campaign.State.choices


def _refuse_naive_instants(data, names: tuple[str, ...]) -> None:
    """DRF would silently read a naive time in the server's zone; the caller must say which instant."""
    if not isinstance(data, dict):
        return
    for name in names:
        raw = data.get(name)
        try:
            parsed = parse_datetime(raw) if isinstance(raw, str) else None
        except ValueError:
            raise serializers.ValidationError({name: ["Not a real date and time (e.g. February 30)."]}) from None
        if parsed is not None and parsed.tzinfo is None:
            raise serializers.ValidationError({name: ["Include a UTC offset or Z, e.g. 2026-12-01T09:00:00Z."]})


def _refuse_offset_wall_time(data, name: str = "local_time") -> None:
    """Django's ``parse_time`` silently drops a UTC offset ("09:00+05:00" → 09:00); a wall time has none."""
    raw = data.get(name) if isinstance(data, dict) else None
    try:
        parsed = time.fromisoformat(raw) if isinstance(raw, str) else None
    except ValueError:
        return  # not a time at all: the field says so
    problem = None if parsed is None else validation.wall_time_problem(parsed)
    if problem:
        raise serializers.ValidationError({name: [problem]})


def _refuse_kind_of_client(context: dict, kind: Kind) -> None:
    """A ``ValidationError`` when the calling API client (``context["client"]``) may not send ``kind``.

    Not for a security kind: it is never a campaign's nor a correction's, whoever asks, and the campaign
    rule refuses it in its own words (adding the kind to the client would not help).
    """
    client = context.get("client")
    if client is not None and kind.category != Category.SECURITY and (refusal := client.kind_refusal(kind)):
        raise serializers.ValidationError(refusal[0].upper() + refusal[1:] + ".")


class ScheduleSerializer(StrictSerializer):
    mode = serializers.ChoiceField(choices=ScheduleMode.choices, default=ScheduleMode.NOW)
    send_at = serializers.DateTimeField(
        default=None, allow_null=True, help_text='For "at": ISO 8601 with a UTC offset, e.g. 2026-12-01T09:00:00Z.'
    )
    local_time = serializers.TimeField(
        default=None, allow_null=True, help_text='For "local_time": the wall time in each recipient\'s zone, "09:00".'
    )

    def to_internal_value(self, data):
        _refuse_naive_instants(data, ("send_at",))
        _refuse_offset_wall_time(data)
        return super().to_internal_value(data)


def _schedule_of(campaign: Campaign) -> dict:
    return ScheduleSerializer(
        {"mode": campaign.schedule_mode, "send_at": campaign.send_at, "local_time": campaign.local_time}
    ).data


class CorrectionSerializer(StrictSerializer):
    template_version = serializers.IntegerField(
        min_value=1, default=None, allow_null=True, help_text="An approved version sent if the campaign goes wrong."
    )
    none_reason = StrictCharField(
        default="", allow_blank=True, max_length=2000, help_text="Why there is no correction template (kept)."
    )

    def validate_template_version(self, value: int | None) -> TemplateVersion | None:
        if value is None:
            return None
        version = TemplateVersion.objects.filter(pk=value).first()
        if version is None:
            raise serializers.ValidationError(f"No template version with id {value}.")
        _refuse_kind_of_client(self.context, version.kind)  # the root serializer's context
        return version


class CampaignCreateSerializer(StrictSerializer):
    """A draft campaign: a person with the approver role approves it later, never an API key."""

    name = StrictCharField(help_text=f"Up to {validation.MAX_NAME} printable characters, no direction controls.")
    kind = serializers.SlugField(max_length=64, help_text="A marketing or transactional kind; security kinds: 422.")
    channel = serializers.ChoiceField(choices=Channel.choices)
    segment = serializers.IntegerField(
        min_value=1, required=False, help_text="The id of a segment this API key created; or give user_ids."
    )
    user_ids = serializers.ListField(
        child=UserIdField(),
        required=False,
        allow_empty=False,
        max_length=MAX_INLINE_USER_IDS,
        error_messages={"max_length": f"At most {MAX_INLINE_USER_IDS:,} user ids; upload a list segment for more."},
        help_text=f"Instead of segment: up to {MAX_INLINE_USER_IDS:,} known user ids, made into a list segment.",
    )
    params = serializers.DictField(required=False, default=dict, help_text="Params shared by every recipient.")
    template_versions = serializers.DictField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        default=dict,
        help_text="Language → approved version id; when left out, the newest approved versions are used at submit.",
    )
    schedule = ScheduleSerializer(required=False)
    end_at = serializers.DateTimeField(
        default=None, allow_null=True, help_text="Nothing more is handed to a provider after this instant."
    )
    correction = CorrectionSerializer(required=False)
    spread_seconds = serializers.IntegerField(
        default=None, allow_null=True, help_text="Send evenly over this many seconds from the start (each wave's)."
    )
    spread_until = serializers.DateTimeField(
        default=None,
        allow_null=True,
        help_text="Or: send evenly from the start until this instant, with a UTC offset.",
    )
    rate_per_second = serializers.FloatField(
        default=None, allow_null=True, help_text="At most this many messages a second; at most the provider budget."
    )
    rate_per_hour = serializers.FloatField(
        default=None, allow_null=True, help_text="Or: at most this many messages an hour."
    )
    sending_hours_start = serializers.TimeField(
        default=None, allow_null=True, help_text='Daily sending window in each recipient\'s local time: from "09:00"…'
    )
    sending_hours_end = serializers.TimeField(default=None, allow_null=True, help_text='…until "20:00" (exclusive).')

    def to_internal_value(self, data):
        _refuse_naive_instants(data, ("end_at", "spread_until"))
        for name in ("sending_hours_start", "sending_hours_end"):
            _refuse_offset_wall_time(data, name)
        return super().to_internal_value(data)

    def validate_name(self, value: str) -> str:
        problem = validation.name_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def validate_kind(self, value: str) -> Kind:
        kind = Kind.objects.filter(name=value).first()
        if kind is None:
            raise serializers.ValidationError(f"Unknown kind {value!r}.")
        _refuse_kind_of_client(self.context, kind)
        return kind

    def validate_segment(self, value: int) -> Segment:
        """Only a segment this API client created (``context["client"]``): another's is answered like an unknown id."""
        segment = Segment.objects.filter(pk=value, client=self.context["client"]).first()
        if segment is None:
            raise serializers.ValidationError(f"No segment with id {value} that this API key may use.")
        return segment

    def validate_params(self, value: dict) -> dict:
        return bounded_params(value)

    def validate(self, attrs: dict) -> dict:
        if ("segment" in attrs) == ("user_ids" in attrs):
            raise serializers.ValidationError({"segment": ["Give either a segment id or a list of user_ids."]})
        if attrs.get("rate_per_second") is not None and attrs.get("rate_per_hour") is not None:
            raise serializers.ValidationError({"rate_per_hour": ["Give the rate per second or per hour, not both."]})
        problems = validation.params_problems(attrs["kind"].params, attrs.get("params", {}))
        if problems:
            raise serializers.ValidationError({"params": {name: [problem] for name, problem in problems.items()}})
        return attrs

    def draft_fields(self) -> dict:
        """The validated body as ``actions.create_draft`` keywords."""
        data = dict(self.validated_data)
        schedule = data.pop("schedule", None) or {"mode": ScheduleMode.NOW, "send_at": None, "local_time": None}
        correction = data.pop("correction", None) or {"template_version": None, "none_reason": ""}
        per_hour = data.pop("rate_per_hour")
        if per_hour is not None:
            data["rate_per_second"] = per_hour / 3600
        return {
            **data,
            "schedule_mode": schedule["mode"],
            "send_at": schedule["send_at"],
            "local_time": schedule["local_time"],
            "correction_version": correction["template_version"],
            "correction_none_reason": correction["none_reason"],
        }


class CampaignListQuerySerializer(StrictSerializer):
    """The query of ``GET /api/v1/campaigns``: a page of the key's own campaigns, newest first."""

    limit = serializers.IntegerField(
        min_value=1, max_value=MAX_LIST_LIMIT, default=DEFAULT_LIST_LIMIT, help_text="Campaigns in this page."
    )
    before = serializers.IntegerField(
        min_value=1, required=False, help_text="The next_before of the previous page: campaigns older than that id."
    )


class ApprovalSerializer(serializers.ModelSerializer):
    approver = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = CampaignApproval
        fields = ["at", "approver", "decision", "comment", "content_hash", "voided_at"]


class AuditSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_name", read_only=True)

    class Meta:
        model = CampaignAudit
        fields = ["at", "actor", "action", "content_hash", "detail"]


class SegmentSummarySerializer(serializers.ModelSerializer):
    class Meta:
        model = Segment
        fields = ["id", "name", "kind"]


class CountsSerializer(serializers.Serializer):
    """Notifications per state."""

    queued = serializers.IntegerField()
    scheduled = serializers.IntegerField()
    sending = serializers.IntegerField()
    sent = serializers.IntegerField(help_text="Handed to a provider and accepted.")
    failed = serializers.IntegerField()
    suppressed = serializers.IntegerField()
    expired = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    delivered = serializers.IntegerField(help_text="The provider's receipt says it reached the handset.")
    undelivered = serializers.IntegerField(help_text="The provider's receipt says it never will.")


class InFlightOutcomeSerializer(serializers.Serializer):
    """What became of the notifications in flight (sending) at the cancel."""

    sent = serializers.IntegerField()
    failed = serializers.IntegerField()
    expired = serializers.IntegerField()
    cancelled = serializers.IntegerField()
    still_in_flight = serializers.IntegerField(help_text="Still sending, or queued for a retry.")


class LedgerSerializer(serializers.Serializer):
    """The exact ledger of a cancelled campaign: ``sent`` = ``sent_at_cancel`` + ``in_flight_outcome.sent``."""

    cancelled_at = serializers.DateTimeField()
    cancelled_by = serializers.CharField(help_text="The username who cancelled.")
    sent = serializers.IntegerField(help_text="Handed to a provider and accepted, to date.")
    sent_at_cancel = serializers.IntegerField()
    cancelled = serializers.IntegerField(help_text="Not yet handed to a provider at the cancel: never sent.")
    in_flight_at_cancel = serializers.IntegerField(help_text="Being handed to a provider at the cancel.")
    in_flight_outcome = InFlightOutcomeSerializer()


class CampaignSerializer(serializers.ModelSerializer):
    """A campaign as its creator may read it: state, frozen content hash, counts, ledger, approvals and audit trail."""

    kind = serializers.SlugRelatedField(slug_field="name", read_only=True)
    segment = SegmentSummarySerializer(read_only=True)
    params = serializers.SerializerMethodField()
    schedule = serializers.SerializerMethodField()
    correction = serializers.SerializerMethodField()
    author = serializers.SlugRelatedField(slug_field="username", read_only=True)
    counts = serializers.SerializerMethodField(
        help_text="Its notifications per state, every state named (0 before the fan-out made any)."
    )
    ledger = serializers.SerializerMethodField(
        help_text="The exact split of a cancel (campaigns/ledger.py); null unless the campaign was cancelled."
    )
    approvals = ApprovalSerializer(many=True, read_only=True)
    audit = AuditSerializer(many=True, read_only=True)

    class Meta:
        model = Campaign
        fields = [
            "id", "name", "state", "kind", "channel", "segment", "template_versions", "params", "schedule", "end_at",
            "correction", "content_hash", "author", "created_at", "updated_at", "submitted_at", "paused_at", "counts",
            "ledger", "approvals", "audit", "spread_seconds", "spread_until", "rate_per_second", "sending_hours_start",
            "sending_hours_end", "archived_at",
        ]  # fmt: skip

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_params(self, campaign: Campaign) -> dict:
        return masking.masked_params(campaign.kind, campaign.params)

    @extend_schema_field(ScheduleSerializer)
    def get_schedule(self, campaign: Campaign) -> dict:
        return _schedule_of(campaign)

    @extend_schema_field(CorrectionSerializer)
    def get_correction(self, campaign: Campaign) -> dict:
        return {"template_version": campaign.correction_version_id, "none_reason": campaign.correction_none_reason}

    @extend_schema_field(CountsSerializer)
    def get_counts(self, campaign: Campaign) -> dict[str, int]:
        return self._ledger(campaign).counts

    @extend_schema_field(LedgerSerializer(allow_null=True))
    def get_ledger(self, campaign: Campaign) -> dict | None:
        split = self._ledger(campaign).cancel
        return None if split is None else LedgerSerializer(ledgers.as_dict(split)).data

    def _ledger(self, campaign: Campaign) -> ledgers.Ledger:
        """Counted once per campaign per answer: one GROUP BY serves ``counts`` and ``ledger``."""
        cache = self.context.setdefault("ledgers", {})
        if campaign.pk not in cache:
            cache[campaign.pk] = ledgers.ledger(campaign)
        return cache[campaign.pk]


class CampaignSummarySerializer(serializers.ModelSerializer):
    """One line of the campaign list: no counts or audit (read those at /api/v1/campaigns/{id})."""

    kind = serializers.SlugRelatedField(slug_field="name", read_only=True)
    segment = SegmentSummarySerializer(read_only=True)
    schedule = serializers.SerializerMethodField()

    class Meta:
        model = Campaign
        fields = ["id", "name", "state", "kind", "channel", "segment", "schedule", "end_at", "content_hash",
                  "created_at", "submitted_at"]  # fmt: skip

    @extend_schema_field(ScheduleSerializer)
    def get_schedule(self, campaign: Campaign) -> dict:
        return _schedule_of(campaign)


class CampaignPageSerializer(serializers.Serializer):
    """A page of campaigns, newest first, and the cursor of the next (null on the last page)."""

    campaigns = CampaignSummarySerializer(many=True)
    next_before = serializers.IntegerField(
        allow_null=True, help_text="Pass as before for the next page; null when there are no older campaigns."
    )
