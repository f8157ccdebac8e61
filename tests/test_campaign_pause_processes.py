"""Pause and resume with real processes (deploy/Procfile's web, workers and scheduler), every one killed while paused.

Issue 15's Done-when: a 10,000-recipient SMS campaign paused at about 30 %, every product process
killed with ``kill -9`` and started again, then resumed → each recipient exactly once at the stub
provider, none skipped, the campaign ``done`` with counts equal to the stub's record.
"""

import time
from collections import Counter

import pytest
import requests

from backend.notifications.models import Kind, Notification, Recipient, State
from campaigns import actions
from campaigns.models import Campaign, CampaignAudit, Segment, SegmentMember
from tests.processes import Processes, wait_until, worker_env
from tests.providers_setup import write_providers_file

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

AUDIENCE = 10_000
# Rows the scheduler keeps in the standard queue: paces the campaign at about that many a second (one feed a tick),
# so that a pause lands mid-way.
FEED = 400


def phone(n: int) -> str:
    return f"+1555010{n:04d}"


def segment_of_sms_recipients() -> Segment:
    Recipient.objects.bulk_create(
        Recipient(user_id=f"pp-{n:05d}", phone=phone(n), language="en") for n in range(AUDIENCE)
    )
    segment = Segment.objects.create(name="Pause audience", kind=Segment.Kind.LIST)
    SegmentMember.objects.bulk_create(
        SegmentMember(segment=segment, recipient_id=pk)
        for pk in Recipient.objects.filter(user_id__startswith="pp-").values_list("pk", flat=True)
    )
    return segment


def approved_by_api(client, marketer, approver) -> Campaign:
    """A draft the API client made (so its key may pause it), submitted by the marketer, approved by the approver."""
    campaign = actions.create_draft(
        client, name="Shipping notice", kind=Kind.objects.get(name="shipped"), channel="sms",
        params={"order": "77"}, segment=segment_of_sms_recipients(),
        correction_none_reason="A shipping notice is corrected by the next one.",
    ).campaign  # fmt: skip
    campaign = actions.submit(campaign, marketer)
    return actions.approve(campaign, approver, campaign.content_hash)


def sent() -> int:
    return Notification.objects.filter(state=State.SENT, campaign__isnull=False).count()


class Product:
    """Every process of deploy/Procfile: web, a worker per tier, the scheduler; started and killed together."""

    def __init__(self, processes: Processes):
        self.processes = processes
        self.started = []
        self.url = ""

    def start(self) -> None:
        self.url = self.processes.start_web()
        self.started = [self.processes.running[-1]] + [
            self.processes.start(*command)
            for command in (("run_worker", "standard"), ("run_worker", "high"), ("run_scheduler",))
        ]

    def kill_all(self) -> None:
        for process in self.started:
            self.processes.kill(process)


def test_a_campaign_paused_at_a_third_survives_every_process_killed_and_sends_each_recipient_once_when_resumed(
    orders_service, marketer, approver, provider_stub, smtp_sink, tmp_path
):
    client, key = orders_service
    campaign = approved_by_api(client, marketer, approver)
    providers = write_providers_file(tmp_path / "providers.toml", provider_stub.url, twilio={"rate": 5000})
    env = worker_env(
        smtp_sink.port, NOTIFY_PROVIDERS_FILE=str(providers), NOTIFY_CAMPAIGN_FEED=str(FEED),
        NOTIFY_SWEEP_INTERVAL="1", LOG_LEVEL="WARNING",
    )  # fmt: skip
    headers = {"Authorization": f"Bearer {key}"}
    product = Product(Processes(env))
    try:
        product.start()
        wait_until(lambda: sent() >= AUDIENCE * 3 // 10, 120, "30 % sent")
        paused = requests.post(f"{product.url}/api/v1/campaigns/{campaign.pk}/pause", headers=headers, timeout=10)
        assert paused.status_code == 200 and paused.json()["state"] == "paused"
        time.sleep(2)  # what was in flight at the pause lands
        received_at_pause = len(provider_stub.state.messages)
        time.sleep(3)
        assert len(provider_stub.state.messages) == received_at_pause  # nothing more is handed over
        assert sent() == received_at_pause and 0.25 * AUDIENCE <= received_at_pause < 0.6 * AUDIENCE

        product.kill_all()
        product.start()
        time.sleep(5)  # a few ticks and sweeps of the new scheduler: the campaign stays paused
        assert len(provider_stub.state.messages) == received_at_pause
        assert Campaign.objects.get(pk=campaign.pk).state == Campaign.State.PAUSED
        assert Notification.objects.filter(campaign=campaign, state=State.QUEUED).count() == AUDIENCE - sent()

        resumed = requests.post(f"{product.url}/api/v1/campaigns/{campaign.pk}/resume", headers=headers, timeout=10)
        assert resumed.status_code == 200 and resumed.json()["state"] == "running"
        wait_until(lambda: Campaign.objects.get(pk=campaign.pk).state == Campaign.State.DONE, 180, "the campaign done")
    finally:
        product.processes.stop_all()

    received = Counter(message["to"] for message in provider_stub.state.messages)
    assert received == Counter(phone(n) for n in range(AUDIENCE))  # each recipient exactly once, none skipped
    done = CampaignAudit.objects.get(campaign=campaign, action=CampaignAudit.Action.DONE)
    assert done.detail["counts"] == {State.SENT: AUDIENCE} == {State.SENT: sum(received.values())}
    audit = list(CampaignAudit.objects.filter(campaign=campaign).values_list("action", "actor_name"))
    assert audit[-3:] == [("pause", "api:orders"), ("resume", "api:orders"), ("done", "scheduler")]
