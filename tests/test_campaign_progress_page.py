"""The campaign page (/campaigns/<id>/): who may see it, its polled fragment, its counts, its buttons."""

import re
from datetime import UTC, datetime, time

import pytest
from django.utils import timezone

from backend.notifications.models import Notification, Recipient, State
from campaigns import actions, fanout, ledger
from campaigns.models import Campaign, ScheduleMode
from frontend.campaigns import progress
from tests.campaigns_setup import list_segment, submitted

AUDIENCE = 12


@pytest.fixture
def running(demo_data, marketer, approver) -> Campaign:
    """An approved promo email campaign to 12 recipients, started and fanned out: 4 sent, 1 sending, 7 queued."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"pg-{n:02d}", email=f"pg{n}@example.com", language="en") for n in range(AUDIENCE)
    )
    segment = list_segment([f"pg-{n:02d}" for n in range(AUDIENCE)], name="Page audience")
    campaign = submitted(marketer, segment=segment)
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    actions.start(campaign)
    fanout.fan_out(campaign.pk)
    ids = list(
        Notification.objects.filter(campaign=campaign).order_by("recipient__user_id").values_list("pk", flat=True)
    )
    Notification.objects.filter(pk__in=ids[:4]).update(state=State.SENT, sent_at=timezone.now(), provider="smtp")
    Notification.objects.filter(pk__in=ids[4:5]).update(state=State.SENDING)
    return Campaign.objects.get(pk=campaign.pk)


def counts_in(html: str) -> dict[str, int]:
    return {state: int(n) for state, n in re.findall(r'data-state="(\w+)">(\d+)<', html)}


@pytest.mark.parametrize("persona", ["marketer", "approver", "outsider"])
def test_marketers_approvers_and_support_may_view(client, running, persona, request):
    client.force_login(request.getfixturevalue(persona))
    assert client.get(f"/campaigns/{running.pk}/").status_code == 200
    assert client.get(f"/campaigns/{running.pk}/progress").status_code == 200


def test_others_get_403_and_anonymous_visitors_the_login_page(client, running, editor):
    anonymous = client.get(f"/campaigns/{running.pk}/")
    assert anonymous.status_code == 302 and "login" in anonymous["Location"]
    client.force_login(editor)
    for path in ("", "progress", "ledger.csv"):
        assert client.get(f"/campaigns/{running.pk}/{path}").status_code == 403
    assert client.post(f"/campaigns/{running.pk}/cancel").status_code == 403
    assert Campaign.objects.get(pk=running.pk).state == Campaign.State.RUNNING


def test_an_unknown_campaign_is_404(client, marketer, demo_data):
    client.force_login(marketer)
    assert client.get("/campaigns/999999/").status_code == 404


def test_the_page_shows_the_counts_per_state_the_bar_and_the_timeline(client, running, marketer):
    client.force_login(marketer)
    html = client.get(f"/campaigns/{running.pk}/").content.decode()

    assert counts_in(html) == {
        "queued": 7, "scheduled": 0, "sending": 1, "sent": 4, "delivered": 0, "undelivered": 0, "failed": 0,
        "suppressed": 0, "expired": 0, "cancelled": 0,
    }  # fmt: skip
    assert '<progress id="progress-bar" max="100" value="41">' in html  # 5 of 12 handed over or final
    assert 'id="progress-done">5<' in html and 'id="progress-will-send">12<' in html
    timeline = re.findall(r"<td><bdi>(\w+)</bdi></td>\s*<td>(\w+)", html)
    assert timeline == [("marketer", "Created"), ("marketer", "Submitted"), ("approver", "Approved"),
                        ("scheduler", "Started")]  # fmt: skip
    assert f'<code title="{running.content_hash}">{running.content_hash[:12]}</code>' in html
    assert f'href="/campaigns/{running.pk}/report.pdf"' in html
    assert 'id="cancel-campaign"' in html


def test_the_fragment_polls_every_2_seconds_while_running_and_stops_once_final(client, running, marketer):
    client.force_login(marketer)
    live = client.get(f"/campaigns/{running.pk}/progress", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-trigger="every 2s"' in live and live.lstrip().startswith('<section id="campaign-progress"')
    assert "<html" not in live

    Notification.objects.filter(campaign=running).exclude(state=State.SENT).update(state=State.SENT)
    fanout.finish_done()
    final = client.get(f"/campaigns/{running.pk}/progress", HTTP_HX_REQUEST="true").content.decode()

    assert "hx-trigger" not in final and 'data-live="false"' in final
    assert '<progress id="progress-bar" max="100" value="100">' in final
    assert counts_in(final)["sent"] == AUDIENCE


def test_the_eta_comes_from_the_recent_sent_rate_else_the_provider_budget(running):
    Campaign.objects.filter(pk=running.pk).update(preflight={"will_send": AUDIENCE, "budget_per_second": 2})
    campaign = Campaign.objects.get(pk=running.pk)

    first = progress.progress_of(campaign, None, now=1000.0)
    assert (first.eta_seconds, first.eta_source, first.sample_sent) == (3.5, "provider budget", 4)  # 7 left at 2/s
    # 4 sent 8 s before: 0.5 per second, 7 left.
    later = progress.progress_of(campaign, (992.0, 0), now=1000.0)
    assert (later.eta_seconds, later.eta_source) == (14.0, "recent rate")
    assert (later.sample_at, later.sample_sent) == (992.0, 0)  # the reference is kept until 10 s old
    assert progress.progress_of(campaign, (980.0, 0), now=1000.0).sample_at == 1000.0
    assert progress.eta_text(95) == "about 1 min 35 s"


def test_a_poll_costs_the_same_few_queries_at_any_size(client, running, marketer, django_assert_max_num_queries):
    client.force_login(marketer)
    # Session and user, the campaign, may_cancel's audit check, one GROUP BY for the counts, the timeline; the pace
    # by the minute, the waiting rows by reason with the last of them, and the queued and fed counts in one
    # statement (campaigns/pace.py).
    with django_assert_max_num_queries(10):
        client.get(f"/campaigns/{running.pk}/progress", HTTP_HX_REQUEST="true")


def test_cancel_from_the_page_shows_the_ledger_and_the_csv_link(client, running, approver):
    client.force_login(approver)

    response = client.post(f"/campaigns/{running.pk}/cancel", HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response["HX-Redirect"] == f"/campaigns/{running.pk}/"
    html = client.get(f"/campaigns/{running.pk}/").content.decode()

    assert "Cancelled: nothing more is handed to a provider." in html
    assert 'id="ledger-sent">4<' in html and 'id="ledger-cancelled">7<' in html and 'id="ledger-in-flight">1<' in html
    assert f'href="/campaigns/{running.pk}/ledger.csv"' in html
    assert 'id="cancel-campaign"' not in html
    assert 'hx-trigger="every 2s"' in html  # one row is still in flight
    assert "sent 4, cancelled 7, in flight 1" in html  # the timeline's cancel row


def test_support_sees_no_cancel_button(client, running, outsider):
    client.force_login(outsider)
    assert 'id="cancel-campaign"' not in client.get(f"/campaigns/{running.pk}/").content.decode()


def test_resend_to_the_remainder_from_the_page_opens_the_new_draft(client, running, marketer):
    actions.cancel(running, marketer)
    client.force_login(marketer)
    assert 'id="resend-remainder"' in client.get(f"/campaigns/{running.pk}/").content.decode()

    response = client.post(f"/campaigns/{running.pk}/resend")

    draft = Campaign.objects.get(origin=running)
    assert response.status_code == 302 and response["Location"] == f"/campaigns/{draft.pk}/"
    page = client.get(response["Location"]).content.decode()
    assert "to the remainder: it needs its own approval before it is sent." in page
    assert f'href="/campaigns/{running.pk}/">campaign {running.pk}</a>' in page


def test_a_correction_without_a_template_says_why_there_is_none(client, running, marketer):
    actions.cancel(running, marketer)
    client.force_login(marketer)
    html = client.get(f"/campaigns/{running.pk}/").content.decode()
    assert 'id="send-correction"' not in html
    assert "No correction template: <bdi>A price correction would go out as a new campaign.</bdi>" in html

    client.post(f"/campaigns/{running.pk}/correct")
    page = client.get(f"/campaigns/{running.pk}/").content.decode()
    assert "has no correction template: it said none" in page
    assert not Campaign.objects.filter(origin=running).exists()


def test_a_local_time_campaign_shows_its_rows_per_wave(demo_data, marketer, approver, client):
    segment = list_segment(name="Three zones")
    campaign = submitted(marketer, segment=segment, schedule_mode=ScheduleMode.LOCAL_TIME, local_time=time(9, 0))
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    actions.start(campaign)
    fanout.fan_out(campaign.pk)
    tehran, riyadh = datetime(2026, 12, 1, 5, 30, tzinfo=UTC), datetime(2026, 12, 1, 6, 0, tzinfo=UTC)
    rows = Notification.objects.filter(campaign=campaign)
    rows.filter(recipient__user_id="u-fa-1").update(send_at=tehran, state=State.SENT)
    rows.filter(recipient__user_id="u-ar-1").update(send_at=riyadh, state=State.SCHEDULED)
    rows.filter(recipient__user_id="u-en-1").update(send_at=riyadh, state=State.SCHEDULED)

    waves = progress.progress_of(Campaign.objects.get(pk=campaign.pk), None).waves

    assert [(w.at, w.total, w.counts["sent"], w.counts["scheduled"]) for w in waves] == [
        (tehran, 1, 1, 0),
        (riyadh, 2, 0, 2),
    ]
    client.force_login(marketer)
    assert "2026-12-01 05:30 UTC" in client.get(f"/campaigns/{campaign.pk}/").content.decode()


def test_a_spread_local_time_campaign_lists_no_row_instants_as_waves(demo_data, marketer, approver, client):
    # A spread gives each row its own send_at: listing them as waves would be a table of a million lines.
    campaign = submitted(
        marketer, segment=list_segment(name="Three zones"), schedule_mode=ScheduleMode.LOCAL_TIME,
        local_time=time(9, 0), spread_seconds=3600,
    )  # fmt: skip
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    actions.start(campaign)
    fanout.fan_out(campaign.pk)
    assert Notification.objects.filter(campaign=campaign).values("send_at").distinct().count() == 3

    assert progress.progress_of(Campaign.objects.get(pk=campaign.pk), None).waves == []
    client.force_login(marketer)
    page = client.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="waves"' not in page and "Its rows are spread over each wave" in page


def test_more_instants_than_waves_are_not_listed(demo_data, marketer, approver, monkeypatch):
    monkeypatch.setattr(ledger, "MAX_WAVES", 1)
    campaign = submitted(marketer, segment=list_segment(name="Three zones"), schedule_mode=ScheduleMode.LOCAL_TIME,
                         local_time=time(9, 0))  # fmt: skip
    campaign = actions.approve(campaign, approver, campaign.content_hash)
    actions.start(campaign)
    fanout.fan_out(campaign.pk)

    assert ledger.waves(Campaign.objects.get(pk=campaign.pk)) == []
