"""Campaigns, segments, approvals and audit are read-only in the admin for every role (campaigns/admin.py)."""

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory

from campaigns import actions
from campaigns.models import Campaign, CampaignApproval, CampaignAudit, Segment
from tests.campaigns_setup import submitted

RECORDS = [Campaign, Segment, CampaignApproval, CampaignAudit]


@pytest.mark.parametrize("model", RECORDS, ids=lambda model: model.__name__)
def test_not_even_a_superuser_may_add_change_or_delete(demo_data, model):
    request = RequestFactory().get("/admin/")
    request.user = User.objects.get(username="admin")
    model_admin = admin.site._registry[model]
    permissions = (
        model_admin.has_view_permission(request),
        model_admin.has_add_permission(request),
        model_admin.has_change_permission(request),
        model_admin.has_delete_permission(request),
    )
    assert permissions == (True, False, False, False)


@pytest.mark.parametrize("username", ["admin", "marketer", "approver"])
def test_a_post_to_the_change_form_is_refused(client, marketer, approver, username):
    campaign = submitted(marketer)
    client.force_login(User.objects.get(username=username))
    url = f"/admin/campaigns/campaign/{campaign.pk}/change/"
    assert client.get(url).status_code == 200
    response = client.post(url, {"name": "Renamed", "state": "approved", "content_hash": campaign.content_hash})
    assert response.status_code == 403
    campaign.refresh_from_db()
    assert (campaign.name, campaign.state) == ("Weekend sale", Campaign.State.SUBMITTED)


def test_an_approval_cannot_be_added_through_the_admin(client, marketer, approver):
    campaign = submitted(marketer)
    client.force_login(User.objects.get(username="admin"))
    form = {"campaign": campaign.pk, "approver": approver.pk, "decision": "approved", "content_hash": "x"}
    response = client.post("/admin/campaigns/campaignapproval/add/", form)
    assert response.status_code == 403
    assert not CampaignApproval.objects.exists()


def test_the_audit_list_filters_only_as_listed(client, marketer, approver):
    actions.approve(campaign := submitted(marketer), approver, campaign.content_hash)
    client.force_login(approver)
    assert client.get("/admin/campaigns/campaignaudit/?action__exact=approve").status_code == 200
    assert client.get("/admin/campaigns/campaignaudit/?content_hash__startswith=a").status_code == 400


@pytest.mark.parametrize("model", RECORDS, ids=lambda model: model.__name__)
def test_the_approver_sees_every_list_and_record(client, marketer, approver, model):
    actions.approve(campaign := submitted(marketer), approver, campaign.content_hash)
    client.force_login(approver)
    name = model._meta.model_name
    record = model.objects.first()
    assert client.get(f"/admin/campaigns/{name}/").status_code == 200
    assert client.get(f"/admin/campaigns/{name}/{record.pk}/change/").status_code == 200
