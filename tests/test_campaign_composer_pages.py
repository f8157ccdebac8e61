"""The composer and review pages (frontend/campaigns/composer.py): roles, validation, the live pre-flight, approval."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from backend.notifications.actions import templates as template_actions
from backend.notifications.masking import MASK
from backend.notifications.models import Kind, TemplateVersion
from campaigns import actions
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, Segment
from tests.campaigns_setup import list_segment

NEW, PREFLIGHT, LIST = "/campaigns/new", "/campaigns/preflight", "/campaigns/"
REASON = "A wrong order number would be corrected by support."


@pytest.fixture
def segment(demo_data) -> Segment:
    return list_segment(name="Demo users")


def form(segment: Segment, **changes) -> dict:
    """A valid composer POST: the shipped SMS to the demo users, now, no correction (with a reason)."""
    data = {
        "name": "Order update",
        "kind": "shipped",
        "channel": "sms",
        "segment": str(segment.pk),
        "param_order": "5012",
        "schedule_mode": "now",
        "zone": "UTC",
        "correction": "none",
        "correction_none_reason": REASON,
        "save": "1",
    }
    return {key: value for key, value in {**data, **changes}.items() if value is not None}


def logged_in(client, user):
    client.force_login(user)
    return client


def submitted_by(marketer, segment) -> Campaign:
    kind = Kind.objects.get(name="shipped")
    created = actions.create_draft(
        marketer, name="Order update", kind=kind, channel="sms", params={"order": "5012"}, segment=segment,
        correction_none_reason=REASON,
    )  # fmt: skip
    return actions.submit(created.campaign, marketer)


# --- who may see what ---------------------------------------------------------------------------


@pytest.mark.parametrize("url", [LIST, NEW, "/campaigns/1/edit", "/campaigns/1/review"])
def test_anonymous_visitors_go_to_the_login_page(client, demo_data, url):
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@pytest.mark.parametrize(
    ("persona", "url", "status"),
    [
        ("outsider", LIST, 200),  # support agents follow campaigns (view_campaign) but never compose
        ("outsider", NEW, 403),
        ("editor", LIST, 403),
        ("editor", NEW, 403),
        ("approver", NEW, 403),  # approvers review; they do not compose
        ("approver", LIST, 200),
        ("marketer", LIST, 200),
        ("marketer", NEW, 200),
    ],
)
def test_pages_need_the_role(client, request, persona, url, status):
    response = logged_in(client, request.getfixturevalue(persona)).get(url)

    assert response.status_code == status


def test_the_list_shows_each_campaign_with_its_state_author_and_audience(client, marketer, segment):
    campaign = submitted_by(marketer, segment)

    page = logged_in(client, marketer).get(LIST).content.decode()

    assert f'href="/campaigns/{campaign.pk}/"' in page  # the campaign's own page
    assert "Submitted for approval" in page and ">marketer<" in page
    assert '<td class="seg-number">3</td>' in page
    assert 'id="new-campaign"' in page


# --- composing ----------------------------------------------------------------------------------


def test_a_marketer_saves_a_draft_then_submits_it(client, marketer, segment):
    client = logged_in(client, marketer)

    response = client.post(NEW, form(segment))

    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/campaigns/{campaign.pk}/edit"
    assert (campaign.state, campaign.params, campaign.author) == ("draft", {"order": "5012"}, marketer)
    newest = {v.language: v.pk for v in TemplateVersion.objects.filter(kind__name="shipped", channel="sms")}
    assert campaign.template_versions == newest  # the newest approved per language by default

    response = client.post(f"/campaigns/{campaign.pk}/edit", form(segment, save=None, submit="1"))

    campaign.refresh_from_db()
    assert response.status_code == 302
    assert (campaign.state, campaign.preflight["audience"], len(campaign.content_hash)) == ("submitted", 3, 64)


@pytest.mark.parametrize(
    ("changes", "status", "message"),
    [
        ({"name": ""}, 400, "Give the campaign a name."),
        ({"kind": "otp"}, 400, "otp: security kinds cannot be sent as a campaign."),
        ({"kind": "digest"}, 400, "digest: the digest gathers what a rate limit held back for one person"),
        ({"template_ar": "999999"}, 400, "Unknown template version &#x27;999999&#x27; for ar"),
        ({"template_xx": "1"}, 400, "There is no approved shipped template in &#x27;xx&#x27;."),
        ({"correction": "999999"}, 400, "Unknown template version &#x27;999999&#x27;"),
        ({"schedule_mode": "at", "send_at": "2020-01-01T09:00"}, 422,
         "The send time (send_at) 2020-01-01 09:00:00 UTC is in the past"),
        ({"schedule_mode": "at", "send_at": "tomorrow"}, 400, "is not a date and time"),
        ({"zone": "Mars/Olympus", "end_at": "2030-01-01T09:00"}, 400, "Unknown time zone"),
        ({"param_order": "1234567890123"}, 400, "order is at most 12 characters."),
        ({"name": "Order \u202eupdate"}, 400, "A name cannot hold direction controls"),
        ({"name": "Order\x07update"}, 400, "A name is up to 187 printable characters."),
        ({"schedule_mode": "local_time", "local_time": "09:00+05:00"}, 400,
         "Give a wall time without a UTC offset, e.g. 09:00: each recipient&#x27;s own zone applies."),
        ({"correction": "", "correction_none_reason": "", "save": None, "submit": "1"}, 422,
         "Name a correction template version"),
    ],
)  # fmt: skip
def test_bad_input_is_explained_and_nothing_is_saved(client, marketer, segment, changes, status, message):
    segments = Segment.objects.count()

    response = logged_in(client, marketer).post(NEW, form(segment, **changes))

    assert response.status_code == status
    assert message in response.content.decode()
    assert (Campaign.objects.count(), Segment.objects.count()) == (0, segments)


def test_a_time_zone_nothing_is_read_in_is_not_checked(client, marketer, segment):
    """A local-time campaign without an end reads no instant: the zone box (left as typed) is not its business."""
    changes = {"schedule_mode": "local_time", "local_time": "09:00", "zone": "Mars/Olympus"}
    response = logged_in(client, marketer).post(NEW, form(segment, **changes))
    assert response.status_code == 302
    campaign = Campaign.objects.get()
    assert (campaign.schedule_mode, campaign.local_time.isoformat(), campaign.end_at) == (
        "local_time",
        "09:00:00",
        None,
    )


def test_the_live_preflight_answers_figures_and_previews_for_htmx(client, marketer, segment):
    response = logged_in(client, marketer).post(PREFLIGHT, form(segment), headers={"HX-Request": "true"})

    page = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in page  # a fragment
    assert '<dd id="pf-audience">3</dd>' in page and '<dd id="pf-will-send">3</dd>' in page
    assert '<div class="cmp-message" lang="ar" dir="rtl">' in page and "تم شحن طلبك رقم 5012." in page
    assert '<div class="cmp-message" lang="en" dir="ltr">' in page
    assert 'id="pf-countries"' in page and "<td>SA</td>" in page
    assert 'hx-swap-oob="true"' in page  # the pickers of the kind and channel chosen (none shown before)


def test_the_live_preflight_keeps_the_pickers_while_kind_and_channel_stay(client, marketer, segment):
    data = form(segment, pickers_for="shipped:sms", param_order="50")

    page = logged_in(client, marketer).post(PREFLIGHT, data, headers={"HX-Request": "true"}).content.decode()

    assert "hx-swap-oob" not in page  # the params being typed are not replaced under the cursor
    assert "تم شحن طلبك رقم 50." in page


def test_the_live_preflight_says_what_is_missing(client, marketer, segment):
    page = logged_in(client, marketer).post(PREFLIGHT, form(segment, param_order=""), headers={"HX-Request": "true"})

    assert "missing params: order" in page.content.decode()


def test_an_edit_after_approval_voids_it_and_the_page_says_why(client, marketer, approver, segment):
    campaign = submitted_by(marketer, segment)
    actions.approve(campaign, approver, campaign.content_hash)

    client = logged_in(client, marketer)
    client.post(f"/campaigns/{campaign.pk}/edit", form(segment, name="Order update (fixed)"))
    page = client.get(f"/campaigns/{campaign.pk}/edit").content.decode()

    campaign.refresh_from_db()
    assert (campaign.state, campaign.preflight) == ("draft", {})
    assert 'id="compose-void"' in page and "Back to draft: edited while approved (name changed)" in page


# --- reviewing ----------------------------------------------------------------------------------


def test_the_author_sees_no_approve_button_even_with_the_approver_role(client, marketer, segment):
    marketer.groups.add(Group.objects.get(name="approver"))
    campaign = submitted_by(marketer, segment)

    page = logged_in(client, marketer).get(f"/campaigns/{campaign.pk}/review").content.decode()

    assert 'id="review-approve"' not in page
    assert "was written by marketer: a second person must approve it." in page
    assert campaign.content_hash in page


@pytest.mark.parametrize("both_roles", [False, True])
def test_a_crafted_approval_by_the_author_is_refused(client, marketer, segment, both_roles):
    if both_roles:
        marketer.groups.add(Group.objects.get(name="approver"))
    campaign = submitted_by(marketer, segment)

    response = logged_in(client, marketer).post(
        f"/campaigns/{campaign.pk}/review", {"decision": "approve", "content_hash": campaign.content_hash}
    )

    assert response.status_code == 403
    assert 'id="review-error"' in response.content.decode()
    assert Campaign.objects.get(pk=campaign.pk).state == "submitted"
    assert not CampaignApproval.objects.exists()


def awaiting_badge(page: str) -> tuple[str | None, str | None]:
    """The navigation's counts of templates and of campaigns awaiting approval (None: not shown)."""
    found = [
        re.search(rf'id="{link}"[^>]*>{label} <span class="nav-count"[^>]*>(\d+)<', page)
        for link, label in (("nav-awaiting", "templates"), ("nav-awaiting-campaigns", "campaigns"))
    ]
    return tuple(match.group(1) if match else None for match in found)


def test_the_awaiting_approval_badge_counts_campaigns_beside_templates(client, marketer, approver, editor, segment):
    # Waiting for the approver: one template draft by the editor, and of four campaigns the marketer's submitted one;
    # not a draft, not one approved, not one the approver edited (the two-person rule: a writer may not approve).
    template_actions.save_template_draft(Kind.objects.get(name="shipped"), "en", "sms", editor, text_body="{{ order }}")
    submitted_by(marketer, segment)
    approved = submitted_by(marketer, segment)
    actions.approve(approved, approver, approved.content_hash)
    actions.create_draft(marketer, name="Later", kind=Kind.objects.get(name="shipped"), channel="sms",
                         params={"order": "1"}, segment=segment, correction_none_reason=REASON)  # fmt: skip
    edited = submitted_by(marketer, segment)
    CampaignAudit.objects.create(campaign=edited, actor=approver, actor_name="approver", action="edit")

    page = logged_in(client, approver).get("/campaigns/").content.decode()

    assert "Awaiting approval:" in page
    assert awaiting_badge(page) == ("1", "1")
    assert 'href="/campaigns/" id="nav-awaiting-campaigns"' in page
    assert awaiting_badge(logged_in(client, marketer).get("/campaigns/").content.decode()) == (None, None)


def test_an_approver_sees_the_frozen_content_and_approves_the_hash_shown(client, marketer, approver, segment):
    campaign = submitted_by(marketer, segment)
    client = logged_in(client, approver)

    page = client.get(f"/campaigns/{campaign.pk}/review").content.decode()
    assert f'<input type="hidden" name="content_hash" value="{campaign.content_hash}">' in page
    assert '<dd id="pf-audience">3</dd>' in page and 'lang="ar" dir="rtl"' in page

    response = client.post(
        f"/campaigns/{campaign.pk}/review", {"decision": "approve", "content_hash": campaign.content_hash}
    )

    assert response.status_code == 302
    assert Campaign.objects.get(pk=campaign.pk).state == "approved"


def test_a_stale_hash_is_a_409_with_a_message(client, marketer, approver, segment):
    campaign = submitted_by(marketer, segment)

    response = logged_in(client, approver).post(
        f"/campaigns/{campaign.pk}/review", {"decision": "approve", "content_hash": "0" * 64}
    )

    assert response.status_code == 409
    assert "is not what you were shown" in response.content.decode()
    assert Campaign.objects.get(pk=campaign.pk).state == "submitted"


def test_a_rejection_needs_a_comment(client, marketer, approver, segment):
    campaign = submitted_by(marketer, segment)
    url = f"/campaigns/{campaign.pk}/review"
    client = logged_in(client, approver)

    response = client.post(url, {"decision": "reject", "content_hash": campaign.content_hash, "comment": " "})
    assert (response.status_code, Campaign.objects.get(pk=campaign.pk).state) == (422, "submitted")
    assert "Say why you reject it" in response.content.decode()

    client.post(url, {"decision": "reject", "content_hash": campaign.content_hash, "comment": "Wrong order number."})
    assert Campaign.objects.get(pk=campaign.pk).state == "rejected"


def test_a_correction_of_a_security_kind_is_refused_at_save(client, marketer, segment):
    otp = TemplateVersion.objects.get(kind__name="otp", language="en", channel="sms", status="approved")

    response = logged_in(client, marketer).post(NEW, form(segment, correction=str(otp.pk), correction_none_reason=""))

    assert response.status_code == 422
    assert "otp is a security kind: a correction is a transactional template" in response.content.decode()
    assert not Campaign.objects.exists()


def test_a_schedule_at_an_instant_is_read_in_the_zone_given(client, marketer, segment):
    tomorrow = (timezone.now() + timedelta(days=1)).astimezone(timezone.get_default_timezone())
    wall = tomorrow.strftime("%Y-%m-%d") + "T09:00"

    logged_in(client, marketer).post(NEW, form(segment, schedule_mode="at", send_at=wall, zone="Asia/Riyadh"))

    send_at = Campaign.objects.get().send_at
    assert send_at.strftime("%Y-%m-%d %H:%M") == tomorrow.strftime("%Y-%m-%d") + " 06:00"  # 09:00 at UTC+03:00


def test_a_running_campaign_offers_no_save(client, marketer, approver, segment):
    campaign = submitted_by(marketer, segment)
    actions.approve(campaign, approver, campaign.content_hash)
    actions.start(campaign)
    client = logged_in(client, marketer)

    page = client.get(f"/campaigns/{campaign.pk}/edit").content.decode()
    response = client.post(f"/campaigns/{campaign.pk}/edit", form(segment, name="Too late"))

    assert 'id="compose-save"' not in page and "it can no longer be edited" in page
    assert response.status_code == 422 and "running: it can no longer be edited" in response.content.decode()
    assert Campaign.objects.get(pk=campaign.pk).name == "Order update"


def test_a_secret_param_is_masked_in_the_live_preview_and_on_the_review_page(client, marketer, approver, segment):
    shipped = Kind.objects.get(name="shipped")
    shipped.params["order"]["secret"] = True
    shipped.save()
    live = logged_in(client, marketer).post(PREFLIGHT, form(segment), headers={"HX-Request": "true"}).content.decode()
    campaign = submitted_by(marketer, segment)
    review = logged_in(client, approver).get(f"/campaigns/{campaign.pk}/review").content.decode()

    for page in (live, review):  # the composer's own input still holds what its author typed
        assert "تم شحن طلبك رقم 5012" not in page and f"تم شحن طلبك رقم {MASK}." in page
    assert "5012" not in review and f"<code>order</code> = <bdi>{MASK}</bdi>" in review
