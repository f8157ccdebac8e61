"""POST /api/v1/campaigns makes drafts a person must approve; GET reads one's own (campaigns/api.py)."""

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from rest_framework.test import APIClient

from backend.notifications.models import ApiClient, State, TemplateVersion
from campaigns import actions
from campaigns.models import Campaign, CampaignAudit, Segment
from campaigns.serializers import MAX_INLINE_USER_IDS
from tests.campaigns_setup import list_segment

pytestmark = pytest.mark.usefixtures("demo_data")

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
BODY = {
    "name": "Weekend sale",
    "kind": "promo",
    "channel": "email",
    "user_ids": ["u-ar-1", "u-en-1"],
    "params": {"percent": "20"},
    "schedule": {"mode": "at", "send_at": "2026-12-05T09:00:00Z"},
    "correction": {"none_reason": "A price correction goes out as a new campaign."},
}


@pytest.fixture
def create(api):
    def _create(body: dict, key: str = "weekend-sale-2026"):
        with time_machine.travel(NOW, tick=False):
            return api.post("/api/v1/campaigns", body, format="json", HTTP_IDEMPOTENCY_KEY=key)

    return _create


def test_it_creates_a_draft_with_a_list_segment_of_the_users(create):
    response = create(BODY)
    assert response.status_code == 201, response.json()
    body = response.json()
    campaign = Campaign.objects.get(pk=body["id"])
    assert (body["state"], body["kind"], body["channel"], body["content_hash"]) == ("draft", "promo", "email", "")
    assert body["schedule"] == {"mode": "at", "send_at": "2026-12-05T09:00:00Z", "local_time": None}
    assert body["correction"] == {"template_version": None, "none_reason": BODY["correction"]["none_reason"]}
    assert set(body["counts"].values()) == {0} and body["ledger"] is None and body["approvals"] == []
    assert [(row["actor"], row["action"]) for row in body["audit"]] == [("api:orders", "create")]
    assert sorted(campaign.segment.members.values_list("user_id", flat=True)) == ["u-ar-1", "u-en-1"]
    assert (campaign.author, campaign.client.name, campaign.segment.kind) == (None, "orders", Segment.Kind.LIST)


def test_a_repeated_key_with_the_same_body_answers_the_original(create):
    first = create(BODY)
    again = create(BODY)
    assert (again.status_code, again.json()["id"]) == (200, first.json()["id"])
    assert Campaign.objects.count() == 1 and Segment.objects.count() == 1


def test_a_repeated_key_with_another_body_is_refused(create):
    first = create(BODY)
    response = create({**BODY, "params": {"percent": "50"}})
    assert response.status_code == 422
    assert response.json()["fields"] == {
        "Idempotency-Key": [
            f"This Idempotency-Key already created campaign {first.json()['id']} with a different request; "
            "use a new key for a new campaign."
        ]
    }
    assert Campaign.objects.count() == 1


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"kind": "nope"}, "kind", "Unknown kind 'nope'."),
        ({"kind": "otp", "channel": "sms"}, "kind", "otp: security kinds cannot be sent as a campaign"),
        ({"kind": "digest", "channel": "email"}, "kind",
         "digest: the digest gathers what a rate limit held back for one person, and is no campaign's kind."),
        (
            {"schedule": {"mode": "at", "send_at": "2026-11-30T09:00:00Z"}},
            "schedule.send_at",
            "The send time (send_at) 2026-11-30 09:00:00 UTC is in the past: "
            "pick a time after 2026-12-01 08:00:00 UTC.",
        ),
        ({"schedule": {"mode": "at", "send_at": "2026-12-05T09:00:00"}}, "schedule.send_at",
         "Include a UTC offset or Z, e.g. 2026-12-01T09:00:00Z."),
        ({"user_ids": ["u-en-1", "u-nobody", "u-ghost"]}, "user_ids", "2 unknown user id(s): u-ghost, u-nobody"),
        ({"user_ids": [f"u-{n}" for n in range(MAX_INLINE_USER_IDS + 1)]}, "user_ids",
         "At most 10,000 user ids; upload a list segment for more."),
        ({"segment": 999999}, "segment", "No segment with id 999999 that this API key may use."),
        ({"channel": "fax"}, "channel", '"fax" is not a valid choice.'),
        ({"colour": "red"}, "colour", "Unknown field."),
    ],
    ids=["unknown kind", "security kind", "digest", "past schedule", "naive instant", "unknown users", "too many users",
         "unknown segment", "unknown channel", "unknown field"],
)  # fmt: skip
def test_bad_input_is_a_422_naming_the_field(create, change, field, message):
    body = {**BODY, **change}
    if "segment" in change:
        del body["user_ids"]
    response = create(body)
    assert response.status_code == 422, response.json()
    assert response.json()["fields"] == {field: [message]}
    assert not Campaign.objects.exists()


def test_a_body_that_is_not_json_is_a_400(api):
    response = api.post("/api/v1/campaigns", b"{not json", content_type="application/json", HTTP_IDEMPOTENCY_KEY="k")
    assert (response.status_code, response.json()["error"]) == (400, "malformed_request")


def test_a_missing_idempotency_key_is_a_400(api):
    response = api.post("/api/v1/campaigns", BODY, format="json")
    assert response.status_code == 400
    assert response.json()["message"] == "Missing 'Idempotency-Key' header: name the event, e.g. order-5012-shipped."


def test_a_client_reads_only_its_own_campaigns(create):
    created = create(BODY).json()
    other = APIClient()
    other.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiClient.issue('billing')[1]}")
    assert other.get(f"/api/v1/campaigns/{created['id']}").status_code == 404


def test_an_api_key_has_no_way_to_approve(api, create):
    campaign = create(BODY).json()
    for path in (f"/api/v1/campaigns/{campaign['id']}/approve", f"/api/v1/campaigns/{campaign['id']}"):
        response = api.post(path, {"content_hash": "x"}, format="json", HTTP_IDEMPOTENCY_KEY="approve-it")
        assert response.status_code in (404, 405)
    assert api.patch(f"/api/v1/campaigns/{campaign['id']}", {"state": "approved"}, format="json").status_code == 405
    assert Campaign.objects.get(pk=campaign["id"]).state == Campaign.State.DRAFT
    assert list(CampaignAudit.objects.values_list("action", flat=True)) == ["create"]


def test_the_approve_action_refuses_an_api_client(create, orders_service):
    campaign = Campaign.objects.get(pk=create(BODY).json()["id"])
    problem = actions.approval_problem(campaign, orders_service[0])
    assert problem == "API client orders may not approve campaigns: a person approves them."
    with pytest.raises(actions.PermissionRefused, match=re.escape(problem)):
        actions.approve(campaign, orders_service[0], campaign.content_hash)


def test_the_schema_lists_the_campaign_endpoints_without_an_approve_path(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    assert set(paths["/api/v1/campaigns"]) == {"get", "post"}
    assert set(paths["/api/v1/campaigns/{id}"]) == {"get"}
    assert set(paths["/api/v1/campaigns"]["post"]["responses"]) == {"200", "201", "400", "401", "413", "415", "422"}
    assert not [path for path in paths if "approve" in path]


def test_the_schema_describes_the_counts_per_state_and_the_ledger(client):
    schemas = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    counts = schemas["Counts"]
    assert set(counts["properties"]) == set(counts["required"]) == set(State.values)
    ledger = schemas["Ledger"]["properties"]
    assert set(ledger) == {
        "cancelled_at", "cancelled_by", "sent", "sent_at_cancel", "cancelled", "in_flight_at_cancel",
        "in_flight_outcome",
    }  # fmt: skip
    assert set(schemas["InFlightOutcome"]["properties"]) == {
        "sent",
        "failed",
        "expired",
        "cancelled",
        "still_in_flight",
    }
    assert schemas["Campaign"]["properties"]["ledger"]["nullable"] is True


def test_a_schedule_in_local_time_and_an_end_time(create):
    end = (NOW + timedelta(days=2)).isoformat().replace("+00:00", "Z")
    response = create({**BODY, "schedule": {"mode": "local_time", "local_time": "09:00"}, "end_at": end})
    assert response.status_code == 201, response.json()
    assert response.json()["schedule"] == {"mode": "local_time", "send_at": None, "local_time": "09:00:00"}
    assert response.json()["end_at"] == "2026-12-03T08:00:00Z"


def test_reading_a_campaign_takes_a_fixed_number_of_queries(api, create, marketer, approver, django_assert_num_queries):
    campaign = Campaign.objects.get(pk=create(BODY).json()["id"])
    CampaignAudit.objects.bulk_create(
        CampaignAudit(campaign=campaign, actor=approver, actor_name="approver", action="edit") for _ in range(5)
    )
    # The campaign with its kind, segment and author, its approvals with approvers, its audit, and one GROUP BY
    # of its notifications per state (the counts). The key's client was looked up by create() and is reused for
    # a few seconds (api/auth.py), and its last_used_at, written at NOW, is not written again within a minute:
    # read at NOW too, whatever today's clock says.
    with time_machine.travel(NOW, tick=False), django_assert_num_queries(4):
        response = api.get(f"/api/v1/campaigns/{campaign.pk}")
    assert len(response.json()["audit"]) == 6


# --- what the composer refuses, the API refuses (campaigns/validation.py) ---------------------------------------------


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"name": "Sale \u202eelas"}, "name",
         "A name cannot hold direction controls (U+202A–U+202E, U+2066–U+2069): they reverse the text shown."),
        ({"name": "Sale \u2067 isolated"}, "name",
         "A name cannot hold direction controls (U+202A–U+202E, U+2066–U+2069): they reverse the text shown."),
        ({"name": "Weekend\nsale"}, "name", "A name is up to 187 printable characters."),
        ({"name": "Weekend sale\x07"}, "name", "A name is up to 187 printable characters."),
        ({"params": {"percent": "1000000"}}, "params.percent", "percent is at most 3 characters."),
        ({"params": {"percent": 1000}}, "params.percent", "percent is at most 3 characters."),
        ({"params": {"percent": ["20"]}}, "params.percent", "percent is a text."),
        ({"schedule": {"mode": "local_time", "local_time": "09:00+05:00"}}, "schedule.local_time",
         "Give a wall time without a UTC offset, e.g. 09:00: each recipient's own zone applies."),
    ],
    ids=["right-to-left override", "isolate", "newline", "bell", "long param", "long number param", "list for a text",
         "wall time with an offset"],
)  # fmt: skip
def test_what_the_composer_refuses_is_a_422(create, change, field, message):
    response = create({**BODY, **change})
    assert response.status_code == 422, response.json()
    assert response.json()["fields"] == {field: [message]}
    assert not Campaign.objects.exists() and not Segment.objects.exists()


def test_a_name_leaves_room_for_the_derived_segments_suffix(create):
    refused = create({**BODY, "name": "x" * 188})
    assert (refused.status_code, refused.json()["fields"]) == (
        422,
        {"name": ["A name is up to 187 printable characters."]},
    )

    response = create({**BODY, "name": "x" * 187}, key="longest-name")

    assert response.status_code == 201, response.json()
    assert response.json()["segment"]["name"] == "x" * 187 + " (list)"


def test_a_list_param_is_checked_item_by_item(create):
    body = {**BODY, "kind": "digest", "params": {"items": ["fine", "x" * 2001], "count": "2"}}
    response = create(body)
    assert response.status_code == 422, response.json()
    assert response.json()["fields"] == {"params.items": ["items is at most 2000 characters."]}


def test_a_wall_time_without_an_offset_is_kept(create):
    response = create({**BODY, "schedule": {"mode": "local_time", "local_time": "09:00"}})
    assert response.status_code == 201, response.json()
    assert response.json()["schedule"] == {"mode": "local_time", "send_at": None, "local_time": "09:00:00"}


# --- segments: a client names only its own ----------------------------------------------------------------------------


def test_a_client_uses_a_segment_it_created(create):
    first = create(BODY).json()
    body = {key: value for key, value in BODY.items() if key != "user_ids"}
    response = create({**body, "segment": first["segment"]["id"]}, key="weekend-sale-again")
    assert response.status_code == 201, response.json()
    assert response.json()["segment"] == first["segment"]


def test_another_clients_or_a_staff_segment_is_answered_like_an_unknown_one(create):
    staff = list_segment(name="VIP customers")
    billing = actions.create_list_segment(ApiClient.issue("billing")[0], "Billing's list", ["u-en-1"])
    body = {key: value for key, value in BODY.items() if key != "user_ids"}
    answers = {pk: create({**body, "segment": pk}).json() for pk in (staff.pk, billing.pk, 999999)}
    assert {pk: answer["fields"] for pk, answer in answers.items()} == {
        pk: {"segment": [f"No segment with id {pk} that this API key may use."]}
        for pk in (staff.pk, billing.pk, 999999)
    }
    assert "VIP" not in str(answers) and "Billing" not in str(answers)
    assert not Campaign.objects.exists()


# --- the correction template: an approved template of the campaign kind's category ------------------------------------


def _version(kind: str, language: str = "en", channel: str = "email") -> int:
    return TemplateVersion.objects.get(kind__name=kind, language=language, channel=channel, status="approved").pk


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("otp", "otp is a security kind: a correction is a marketing template, like the campaign's promo."),
        ("shipped",
         "shipped is a transactional kind: a correction is a marketing template, like the campaign's promo."),
    ],
)  # fmt: skip
def test_a_correction_of_another_kind_family_is_refused(create, kind, message):
    version = _version(kind)
    response = create({**BODY, "correction": {"template_version": version}})
    assert response.status_code == 422, response.json()
    assert response.json()["fields"] == {
        "correction.template_version": [f"{TemplateVersion.objects.get(pk=version)}: {message}"]
    }
    assert not Campaign.objects.exists()


def test_a_correction_of_the_same_kind_family_is_kept(create):
    response = create({**BODY, "correction": {"template_version": _version("promo")}})
    assert response.status_code == 201, response.json()
    assert response.json()["correction"] == {"template_version": _version("promo"), "none_reason": ""}


# --- GET /api/v1/campaigns: the key's own campaigns, newest first ----------------------------------------------------


def test_the_list_pages_through_the_clients_own_campaigns_newest_first(api, create):
    ids = [create({**BODY, "name": f"Sale {n}"}, key=f"sale-{n}").json()["id"] for n in range(5)]
    billing = APIClient()
    billing.credentials(HTTP_AUTHORIZATION=f"Bearer {ApiClient.issue('billing')[1]}")

    first = api.get("/api/v1/campaigns", {"limit": 2})
    second = api.get("/api/v1/campaigns", {"limit": 2, "before": first.json()["next_before"]})
    last = api.get("/api/v1/campaigns", {"limit": 2, "before": second.json()["next_before"]})

    assert [response.status_code for response in (first, second, last)] == [200, 200, 200]
    pages = [[(row["id"], row["name"]) for row in page.json()["campaigns"]] for page in (first, second, last)]
    assert pages == [[(ids[4], "Sale 4"), (ids[3], "Sale 3")], [(ids[2], "Sale 2"), (ids[1], "Sale 1")],
                     [(ids[0], "Sale 0")]]  # fmt: skip
    assert [page.json()["next_before"] for page in (first, second, last)] == [ids[3], ids[1], None]
    row = first.json()["campaigns"][0]
    assert (row["state"], row["kind"], row["channel"], row["segment"]["name"]) == ("draft", "promo", "email",
                                                                                   "Sale 4 (list)")  # fmt: skip
    assert row["schedule"] == {"mode": "at", "send_at": "2026-12-05T09:00:00Z", "local_time": None}
    assert billing.get("/api/v1/campaigns").json() == {"campaigns": [], "next_before": None}


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"limit": 101}, "limit", "Ensure this value is less than or equal to 100."),
        ({"limit": 0}, "limit", "Ensure this value is greater than or equal to 1."),
        ({"before": "x"}, "before", "A valid integer is required."),
        ({"page": 2}, "page", "Unknown field."),
        ({"before": [10, 5]}, "before", "Given 2 times; give it once."),
    ],
)
def test_a_bad_list_query_is_a_422(api, query, field, message):
    response = api.get("/api/v1/campaigns", query)
    assert response.status_code == 422, response.json()
    assert response.json()["fields"] == {field: [message]}
