"""The single send's one-statement read (actions/accept_reads.py) gives what the ORM queries it replaced give."""

from datetime import timedelta

import pytest
from django.utils import timezone

from backend.notifications import policy, rendering
from backend.notifications.actions import accept_reads
from backend.notifications.models import Device, Kind, Notification, Preference, Recipient, TemplateVersion
from tests.campaigns_setup import draft

pytestmark = pytest.mark.usefixtures("demo_data")


def campaign_row(campaign, kind: Kind, recipient: Recipient, ago: timedelta, **fields) -> None:
    """A campaign notification to ``recipient`` created ``ago`` before now."""
    key = f"{kind.name}-{ago.total_seconds()}-{fields}"
    Notification.objects.create(
        idempotency_key=key, idempotency_scope="campaign:test", request_hash="x", recipient=recipient, kind=kind,
        channel="email", priority=fields.pop("priority", "standard"), state=fields.pop("state", "queued"),
        campaign=campaign,
    )  # fmt: skip
    Notification.objects.filter(idempotency_key=key).update(created_at=timezone.now() - ago)


def as_the_orm_reads(kind: Kind, recipient: Recipient, now) -> tuple:
    """Preferences, active device and campaign events in the widest window, as each check's own queries read them."""
    since = now.timestamp() - max(window.seconds for window in policy._rate_windows(kind, recipient))
    device = recipient.devices.filter(disabled_at__isnull=True).exists()
    return policy.preferences(recipient, kind), device, policy.campaign_events(kind, recipient, since)


def test_one_statement_reads_what_the_five_queries_read(marketer, settings, django_assert_num_queries):
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 3, "d": 10}}}
    promo, shipped = Kind.objects.get(name="promo"), Kind.objects.get(name="shipped")
    layla = Recipient.objects.get(user_id="u-ar-1")
    Preference.objects.create(recipient=layla, kind=promo, channel="sms", enabled=False)
    Preference.objects.create(recipient=layla, kind=promo, channel="email", enabled=True)
    Preference.objects.create(recipient=layla, kind=shipped, channel="email", enabled=False)
    Device.objects.create(recipient=layla, platform="fcm", token="t-1", subscription={})
    campaign = draft(marketer)
    for hours in (1, 5, 30):  # counted: within the day; 30 h ago is outside every window
        campaign_row(campaign, promo, layla, timedelta(hours=hours))
    campaign_row(campaign, promo, layla, timedelta(hours=2), state="suppressed")  # not counted
    campaign_row(campaign, promo, layla, timedelta(hours=2), priority="high")  # not counted
    campaign_row(campaign, shipped, layla, timedelta(hours=2))  # another category
    now = timezone.now()

    with django_assert_num_queries(1):
        kind, recipient, facts, version_for = accept_reads.load("promo", "u-ar-1", now)

    chosen, device, events = as_the_orm_reads(promo, layla, now)
    assert (kind, recipient) == (promo, layla)
    assert facts.chosen == chosen == {"sms": False, "email": True}
    assert facts.has_device is device is True
    assert [at for at in facts.campaign_events if at > now.timestamp() - 86400] == events
    assert len(events) == 2
    for channel in ("email", "sms", "push", "inapp"):
        assert version_for(kind, channel, "ar") == rendering.select_version(promo, channel, "ar")


def test_the_version_falls_back_to_the_kinds_default_language_and_takes_the_newest(demo_data):
    shipped = Kind.objects.get(name="shipped")
    urdu = Recipient.objects.create(user_id="u-ur-1", email="imran@example.com", language="ur")  # no Urdu template
    english = TemplateVersion.objects.get(kind=shipped, channel="email", language="en", status="approved")
    newer = TemplateVersion.objects.create(
        kind=shipped, channel="email", language="en", version=english.version + 1, status="approved",
        subject="Shipped again", text_body="{{ order }}", html_body="",
    )  # fmt: skip

    kind, recipient, _, version_for = accept_reads.load("shipped", "u-ur-1", timezone.now())

    assert recipient == urdu
    assert version_for(kind, "email", "ur") == rendering.select_version(shipped, "email", "ur") == newer
    assert str(version_for(kind, "email", "ur")) == str(newer)


def test_an_unknown_kind_or_user_reads_none(demo_data):
    assert accept_reads.load("no-such-kind", "u-en-1", timezone.now())[:2] == (None, None)
    kind, recipient, _, _ = accept_reads.load("shipped", "nobody", timezone.now())
    assert (kind.name, recipient) == ("shipped", None)
