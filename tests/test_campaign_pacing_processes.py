"""Per-campaign rates with real processes (deploy/Procfile's scheduler and standard worker) and the stub providers.

Two campaigns on different providers — SMS on the Twilio stub at 50/s and push on the FCM stub at
200/s — run side by side with the providers' budgets far above both; each keeps its own rate,
counted from what the stub providers received over 20 seconds.
"""

import time

import pytest

from backend.notifications.models import Device, Kind, Recipient
from campaigns import actions
from campaigns.models import Campaign, Segment, SegmentMember
from tests.campaigns_setup import draft
from tests.processes import Processes, wait_until, worker_env
from tests.providers_setup import write_providers_file

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("demo_data")]

# Seconds measured, after a settling time from the first message (the first tick, the workers warming up).
WINDOW, SETTLE = 20.0, 3.0
RATES = {"twilio": 50, "fcm": 200}


def segment_of(prefix: str, count: int, **contact) -> Segment:
    """``count`` new English recipients in a list segment; ``contact`` builds each one's address from its number."""
    Recipient.objects.bulk_create(
        Recipient(user_id=f"{prefix}-{n:05d}", language="en", time_zone="UTC", **{k: f(n) for k, f in contact.items()})
        for n in range(count)
    )
    members = list(Recipient.objects.filter(user_id__startswith=f"{prefix}-").values_list("pk", flat=True))
    segment = Segment.objects.create(name=prefix, kind=Segment.Kind.LIST)
    SegmentMember.objects.bulk_create(SegmentMember(segment=segment, recipient_id=pk) for pk in members)
    return segment


def approved(marketer, approver, **fields) -> Campaign:
    campaign = actions.submit(draft(marketer, **fields), marketer)
    return actions.approve(campaign, approver, campaign.content_hash)


def test_sms_at_50_and_push_at_200_a_second_side_by_side_each_keep_their_rate(
    provider_stub, smtp_sink, marketer, approver, settings, tmp_path
):
    path = write_providers_file(
        tmp_path / "providers.toml", provider_stub.url, twilio={"rate": 5000}, fcm={"rate": 5000}
    )
    settings.NOTIFY = {**settings.NOTIFY, "PROVIDERS_FILE": str(path)}
    enough = int((SETTLE + WINDOW + 5) * max(RATES.values()))
    sms = segment_of("rate-sms", int(enough / 4), phone=lambda n: f"+1212{2000000 + n}")
    push = segment_of("rate-push", enough)
    Device.objects.bulk_create(
        Device(recipient=r, platform=Device.Platform.FCM, token=f"token-{r.user_id}")
        for r in Recipient.objects.filter(user_id__startswith="rate-push-")
    )
    approved(marketer, approver, name="Shipped SMS", kind=Kind.objects.get(name="shipped"), channel="sms",
             params={"order": "5012"}, segment=sms, rate_per_second=float(RATES["twilio"]))  # fmt: skip
    approved(marketer, approver, name="Promo push", channel="push", segment=push,
             rate_per_second=float(RATES["fcm"]))  # fmt: skip

    env = worker_env(smtp_sink.port, NOTIFY_PROVIDERS_FILE=str(path), NOTIFY_ALLOW_PRIVATE_PUSH_ENDPOINTS="true",
                     LOG_LEVEL="WARNING")  # fmt: skip
    processes = Processes(env)
    try:
        processes.start("run_scheduler")
        processes.start("run_worker", "standard", "--workers", "2")
        wait_until(lambda: len(provider_stub.state.messages) > 0, 60, "the first campaign message at a provider")
        time.sleep(SETTLE + WINDOW + 1)
    finally:
        processes.stop_all()

    messages = list(provider_stub.state.messages)
    start = min(m["at"] for m in messages) + SETTLE
    counted = {
        provider: sum(1 for m in messages if m["provider"] == provider and start <= m["at"] < start + WINDOW)
        for provider in RATES
    }
    for provider, rate in RATES.items():
        expected = rate * WINDOW
        assert 0.9 * expected <= counted[provider] <= 1.1 * expected, (provider, counted)
