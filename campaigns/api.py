"""Views of /api/v1/campaigns: parse, call one action, answer.

An API key creates drafts and reads its own campaigns; approval is a person's act
in the staff pages, so there is no approve endpoint here (DESIGN.md §5).
"""

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from backend.notifications.api.errors import validation_response
from backend.notifications.api.parsers import json_object, single_valued
from backend.notifications.api.views import IDEMPOTENCY_KEY_SCHEMA, idempotency_key
from campaigns import actions, report
from campaigns.models import Campaign
from campaigns.serializers import (
    CampaignCreateSerializer,
    CampaignListQuerySerializer,
    CampaignPageSerializer,
    CampaignSerializer,
)

_ERROR = OpenApiResponse(description="JSON error: {error, message, fields?}")


def _campaign(pk: int, client) -> Campaign:
    """Campaign ``pk`` as ``client`` created it; ``NotFound`` for any other (not even its existence is confirmed)."""
    campaign = (
        Campaign.objects.select_related("kind", "segment", "author")
        .prefetch_related("approvals__approver", "audit")
        .filter(pk=pk, client=client)
        .first()
    )
    if campaign is None:
        raise NotFound(f"No campaign with id {pk}.")
    return campaign


class CampaignCreateView(APIView):
    """``/api/v1/campaigns``: POST creates a draft, GET lists the key's own campaigns."""

    @extend_schema(
        operation_id="list_campaigns",
        parameters=[CampaignListQuerySerializer],
        responses={200: CampaignPageSerializer, 401: _ERROR, 422: _ERROR},
    )
    def get(self, request: Request) -> Response:
        """The campaigns this API client created, newest first, ``limit`` at a time after the ``before`` cursor.

        Keyset pagination on the id (ids grow with creation): a page is stable while new
        campaigns are created, and costs the same however deep. 422 for a bad limit or cursor.
        """
        query = CampaignListQuerySerializer(data=single_valued(request.query_params))
        query.is_valid(raise_exception=True)
        limit, before = query.validated_data["limit"], query.validated_data.get("before")
        campaigns = Campaign.objects.select_related("kind", "segment").filter(client=request.auth)
        if before is not None:
            campaigns = campaigns.filter(pk__lt=before)
        page = list(campaigns.order_by("-pk")[: limit + 1])
        more = len(page) > limit
        page = page[:limit]
        return Response(CampaignPageSerializer({"campaigns": page, "next_before": page[-1].pk if more else None}).data)

    @extend_schema(
        operation_id="create_campaign",
        request=CampaignCreateSerializer,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                IDEMPOTENCY_KEY_SCHEMA,
                OpenApiParameter.HEADER,
                required=True,
                description="A stable name of this campaign request; a repeat with the same body returns the original.",
            )
        ],
        responses={
            201: OpenApiResponse(CampaignSerializer, description="A new draft; a person must submit and approve it."),
            200: OpenApiResponse(CampaignSerializer, description="Duplicate key, same body: the original draft."),
            400: _ERROR,
            401: _ERROR,
            422: OpenApiResponse(
                description="JSON error naming the field: unknown or security kind, a name with control characters, "
                "params over their declared length, a past schedule or a wall time with a UTC offset, a segment this "
                "key did not create, unknown or more than 10,000 user ids, an unapproved template or a correction "
                "outside the kind's category, or a repeated key with a different body."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        """Create a draft campaign (201), or return the original draft for a repeated key (200)."""
        key = idempotency_key(request)
        serializer = CampaignCreateSerializer(data=json_object(request), context={"client": request.auth})
        serializer.is_valid(raise_exception=True)
        try:
            created = actions.create_draft(
                request.auth, idempotency_key=key, payload=request.data, **serializer.draft_fields()
            )
        except actions.CampaignRefused as exc:
            return validation_response({exc.field: [exc.message]})
        return Response(
            CampaignSerializer(_campaign(created.campaign.pk, request.auth)).data,
            status=status.HTTP_200_OK if created.duplicate else status.HTTP_201_CREATED,
        )


class CampaignDetailView(APIView):
    @extend_schema(operation_id="get_campaign", responses={200: CampaignSerializer, 401: _ERROR, 404: _ERROR})
    def get(self, request: Request, pk: int) -> Response:
        """A campaign's state, content hash, counts per state, the ledger of a cancel, approvals and audit trail."""
        return Response(CampaignSerializer(_campaign(pk, request.auth)).data)


class _PauseOrResume(APIView):
    """``POST /api/v1/campaigns/{id}/pause|resume``: the action on a campaign this API client created."""

    act = staticmethod(actions.pause)

    def post(self, request: Request, pk: int) -> Response:
        campaign = _campaign(pk, request.auth)
        try:
            self.act(campaign, request.auth)
        except actions.CampaignRefused as exc:
            return validation_response({exc.field: [exc.message]}, exc.status)
        return Response(CampaignSerializer(_campaign(pk, request.auth)).data)


_REFUSED = OpenApiResponse(description="JSON error: the campaign is not in a state this can be done in (field state).")


class CampaignPauseView(_PauseOrResume):
    @extend_schema(
        operation_id="pause_campaign",
        request=None,
        responses={
            200: OpenApiResponse(
                CampaignSerializer, description="Paused: nothing more is handed to a provider within 2 seconds."
            ),
            401: _ERROR,
            404: _ERROR,
            422: _REFUSED,
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        """Pause a running campaign: its notifications not yet handed over stay queued until it is resumed."""
        return super().post(request, pk)


class CampaignResumeView(_PauseOrResume):
    act = staticmethod(actions.resume)

    @extend_schema(
        operation_id="resume_campaign",
        request=None,
        responses={
            200: OpenApiResponse(CampaignSerializer, description="Running again, with exactly the rest."),
            401: _ERROR,
            404: _ERROR,
            422: _REFUSED,
        },
    )
    def post(self, request: Request, pk: int) -> Response:
        """Resume a paused campaign: it continues with exactly the recipients not yet handed over."""
        return super().post(request, pk)


class PdfRenderer(BaseRenderer):
    """The one thing the report view answers (``Accept: application/pdf`` or ``*/*``); it writes the bytes itself."""

    media_type = "application/pdf"
    format = "pdf"
    charset = None
    render_style = "binary"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return data


class CampaignReportView(APIView):
    renderer_classes = [PdfRenderer]

    @extend_schema(
        operation_id="get_campaign_report",
        responses={
            (200, "application/pdf"): OpenApiResponse(
                OpenApiTypes.BINARY,
                description="The campaign's report: who composed and approved it, its content in every language, "
                "audience and waves, timeline, outcome per state, channel and provider, and cost.",
            ),
            (401, "application/json"): _ERROR,
            (404, "application/json"): _ERROR,
            (406, "application/json"): OpenApiResponse(description="JSON error: the Accept header rules out PDF."),
        },
    )
    def get(self, request: Request, pk: int) -> HttpResponse:
        """The PDF report of a campaign this API client created."""
        return report.pdf_response(_campaign(pk, request.auth))

    def finalize_response(self, request: Request, response, *args, **kwargs):
        # An error is JSON even to a client that accepts only PDF: the PDF renderer cannot draw one.
        if isinstance(response, Response):
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
