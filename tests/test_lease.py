"""Claims are leases: set by the claim, renewed by the worker process that holds them, nothing else."""

import threading
from datetime import timedelta

import pytest
import time_machine
from django.db import connection, transaction
from django.utils import timezone

from backend.notifications import actions
from backend.notifications.delivery import lease
from backend.notifications.models import Notification, State

pytestmark = pytest.mark.usefixtures("demo_data")


@pytest.fixture
def claimed(send):
    def _claimed(kind: str, key: str, **params) -> Notification:
        response = send({"user_id": "u-ar-1", "kind": kind, "params": params}, key=key)
        notification = Notification.objects.get(pk=response.json()["id"])
        assert actions.claim(notification)
        return notification

    return _claimed


def lease_of(notification: Notification):
    return Notification.objects.values_list("lease_until", flat=True).get(pk=notification.pk)


def test_a_claim_holds_for_its_tiers_lease(claimed, settings):
    settings.NOTIFY = {**settings.NOTIFY, "LEASE": {"high": 3.0, "standard": 30.0}}
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        code = claimed("otp", "login-1", code="123456")
        parcel = claimed("shipped", "order-1", order="1")

    assert lease_of(code) == start + timedelta(seconds=3)
    assert lease_of(parcel) == start + timedelta(seconds=30)


def test_renewal_extends_only_what_this_process_holds(claimed, settings):
    settings.NOTIFY = {**settings.NOTIFY, "LEASE": {"high": 3.0, "standard": 30.0}}
    start = timezone.now()
    with time_machine.travel(start, tick=False):
        held = claimed("otp", "login-1", code="123456")
        orphan = claimed("otp", "login-2", code="654321")  # its worker died: nobody renews it

    later = start + timedelta(seconds=2)
    with lease.held(held), time_machine.travel(later, tick=False):
        assert lease.renew() == 1

    assert lease_of(held) == later + timedelta(seconds=3)
    assert lease_of(orphan) == start + timedelta(seconds=3)
    assert lease.renew() == 0  # the block ended: no longer held


def test_renewal_never_touches_a_notification_that_left_sending(claimed):
    code = claimed("otp", "login-1", code="123456")
    with lease.held(code):
        actions.mark_sent(code, "twilio", "SM1")
        assert lease.renew() == 0
    assert Notification.objects.get(pk=code.pk).state == State.SENT


@pytest.mark.django_db(transaction=True)
def test_renewal_skips_a_row_its_worker_is_writing_instead_of_waiting_for_it(claimed):
    """A batch's UPDATE locks its rows in its own order: a heartbeat waiting for them could deadlock with it."""
    busy, free = claimed("shipped", "order-1", order="1"), claimed("shipped", "order-2", order="2")
    locked, release = threading.Event(), threading.Event()

    def batch_writing_its_row():
        with transaction.atomic():
            Notification.objects.select_for_update().get(pk=busy.pk)
            locked.set()
            release.wait(10)
        connection.close()

    writer = threading.Thread(target=batch_writing_its_row)
    writer.start()
    assert locked.wait(10)
    before = lease_of(busy)
    with lease.held(busy), lease.held(free):
        renewed = lease.renew()
    release.set()
    writer.join(10)

    assert renewed == 1
    assert lease_of(busy) == before
