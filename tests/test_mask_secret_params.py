"""manage.py mask_secret_params: what was stored before a param was declared secret gets masked."""

import io

import pytest
from django.core.management import CommandError, call_command

from backend.notifications.delivery import dispatch
from backend.notifications.models import (
    Attempt,
    Category,
    Channel,
    DeadLetter,
    Kind,
    Notification,
    OverLimit,
    State,
    TemplateVersion,
)
from backend.notifications.providers.base import ProviderError
from backend.notifications.providers.twilio import TwilioProvider
from backend.notifications.providers.vonage import VonageProvider

pytestmark = pytest.mark.usefixtures("demo_data", "stub_providers")

MASK = "••••••"
MASKED_AR = f"رمز التحقق الخاص بك هو {MASK}. تنتهي صلاحيته خلال 5 دقائق."


def declare(kind: str, param: str, secret: bool) -> None:
    record = Kind.objects.get(name=kind)
    record.params[param]["secret"] = secret
    record.save()


def everything_stored() -> str:
    """Every stored text that could hold a code: notifications, attempts, dead letters."""
    rows = [
        *Notification.objects.values_list("params", "preview", "last_error"),
        *Attempt.objects.values_list("error"),
        *DeadLetter.objects.values_list("last_error"),
    ]
    return repr(rows)


def run() -> str:
    out = io.StringIO()
    call_command("mask_secret_params", stdout=out)
    return out.getvalue()


@pytest.fixture
def stored_before_declaring(send, settings, monkeypatch):
    """A sent OTP, a dead-lettered one whose errors quote it, and vouchers folded into a digest, all in clear."""
    declare("otp", "code", False)
    voucher = Kind.objects.create(
        name="voucher", category=Category.MARKETING, channels=[Channel.EMAIL], over_limit=OverLimit.DIGEST,
        params={"voucher": {"example": "AB12", "max_length": 12}},
    )  # fmt: skip
    TemplateVersion.objects.create(
        kind=voucher, language="en", channel=Channel.EMAIL, status=TemplateVersion.Status.APPROVED,
        subject="Your voucher {{ voucher }}", text_body="Use {{ voucher }} at checkout.",
    )  # fmt: skip
    settings.NOTIFY = {**settings.NOTIFY, "MAX_ATTEMPTS": 1, "RATE_LIMITS": {"marketing": {"h": 1, "d": 10}}}

    sent = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "K7QX9Z"}}, key="login-1").json()["id"]
    dispatch.deliver(sent)

    def echo(self, message):
        raise ProviderError(f"{self.name} answered HTTP 503: could not send {message.text!r}", permanent=False)

    monkeypatch.setattr(TwilioProvider, "send", echo)
    monkeypatch.setattr(VonageProvider, "send", echo)
    dead = send({"user_id": "u-ar-1", "kind": "otp", "params": {"code": "K7QX9Y"}}, key="login-2").json()["id"]
    dispatch.deliver(dead)
    monkeypatch.undo()
    for n in range(3):
        send({"user_id": "u-en-1", "kind": "voucher", "params": {"voucher": f"K7QX9V{n}"}}, key=f"voucher-{n}")
    assert "K7QX9Z" in everything_stored() and "K7QX9Y" in everything_stored() and "K7QX9V1" in everything_stored()
    return {"sent": sent, "dead": dead}


def test_it_masks_previews_errors_digests_and_finished_params(stored_before_declaring):
    declare("otp", "code", True)
    declare("voucher", "voucher", True)

    assert run().splitlines() == [
        "otp: 2 notifications masked, 0 digests rebuilt",
        "voucher: 3 notifications masked, 1 digests rebuilt",
    ]

    sent = Notification.objects.get(pk=stored_before_declaring["sent"])
    assert (sent.state, sent.params, sent.preview) == (State.SENT, {"code": MASK}, MASKED_AR)
    dead = Notification.objects.get(pk=stored_before_declaring["dead"])
    assert (dead.state, dead.preview) == (State.FAILED, MASKED_AR)
    assert dead.last_error == f"vonage answered HTTP 503: could not send '{MASKED_AR}'"
    assert DeadLetter.objects.get().last_error == dead.last_error
    assert sorted(dead.attempts.values_list("error", flat=True)) == [
        f"twilio answered HTTP 503: could not send '{MASKED_AR}'",
        f"vonage answered HTTP 503: could not send '{MASKED_AR}'",
    ]
    # Its dead letter may still be replayed: the code stays where only the worker reads it.
    assert dead.params == {"code": "K7QX9Y"}
    [digest] = Notification.objects.filter(kind__name="digest")
    assert digest.params == {"items": [f"Your voucher {MASK}"] * 2, "count": 2}
    # The first voucher is still queued: only its preview is masked, the worker needs the code.
    queued = Notification.objects.get(kind__name="voucher", state=State.QUEUED)
    assert (queued.params, queued.preview) == ({"voucher": "K7QX9V0"}, f"Your voucher {MASK}")
    assert [code for code in ("K7QX9Z", "K7QX9V1", "K7QX9V2") if code in everything_stored()] == []

    assert run().splitlines() == [
        "otp: 0 notifications masked, 0 digests rebuilt",
        "voucher: 0 notifications masked, 0 digests rebuilt",
    ]


def test_it_refuses_a_kind_without_secrets():
    with pytest.raises(CommandError) as refused:
        call_command("mask_secret_params", "--kind", "shipped")
    assert str(refused.value) == "No kind with a secret param named shipped."


def test_a_digest_filled_by_one_batch_is_refolded_in_key_order(api, settings):
    """A batch's rows share their created_at: the refold breaks the tie by key, never by the random primary key."""
    voucher = Kind.objects.create(
        name="voucher", category=Category.MARKETING, channels=[Channel.EMAIL], over_limit=OverLimit.DIGEST,
        params={"voucher": {"example": "AB12", "max_length": 12}, "shop": {"example": "Tehran", "max_length": 20}},
    )  # fmt: skip
    TemplateVersion.objects.create(
        kind=voucher, language="en", channel=Channel.EMAIL, status=TemplateVersion.Status.APPROVED,
        subject="{{ shop }}: {{ voucher }}", text_body="Use {{ voucher }} at {{ shop }}.",
    )  # fmt: skip
    settings.NOTIFY = {**settings.NOTIFY, "RATE_LIMITS": {"marketing": {"h": 1, "d": 10}}}
    shops = ["Fir", "Ash", "Elm", "Oak", "Yew", "Box", "Bay"]
    items = [
        {"idempotency_key": f"voucher-{n}", "user_id": "u-en-1", "kind": "voucher",
         "params": {"voucher": f"K7QX9V{n}", "shop": shop}}
        for n, shop in enumerate(shops)
    ]  # fmt: skip
    assert api.post("/api/v1/notifications/batch", {"items": items}, format="json").json()["accepted"] == 7
    declare("voucher", "voucher", True)

    run()

    [digest] = Notification.objects.filter(kind__name="digest")
    # voucher-0 went out; the other six were folded, and are refolded in the order of their keys.
    assert digest.params["items"] == [f"{shop}: {MASK}" for shop in shops[1:]]
