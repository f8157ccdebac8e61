"""How FCM HTTP v1 error answers are read: which fail the notification, which retry, which disable the device.

Real HTTP against the stub, which answers with FCM's error bodies (backend/stubs/provider_server.py, FCM_ERRORS).
"""

import pytest

from backend.notifications.delivery import dispatch
from backend.notifications.models import Device, Notification, Recipient, State
from backend.notifications.providers.base import OutboundMessage, ProviderError, provider_named
from backend.notifications.providers.fcm import names_the_token

TOKEN = "fcm-token-1"


def fcm_answer(stub, outcome: str) -> ProviderError:
    stub.state.faults = {"fcm": {"rules": {TOKEN: outcome}}}
    message = OutboundMessage(notification_id="n-1", channel="push", to=TOKEN, subject="Hi", text="Hello")
    with pytest.raises(ProviderError) as raised:
        provider_named("fcm").send(message)
    return raised.value


@pytest.mark.parametrize(
    ("outcome", "permanent", "disabled", "retry_after", "error"),
    [
        ("unregistered", True, True, None, "fcm 404 UNREGISTERED: Requested entity was not found."),
        ("sender-id-mismatch", True, True, None, "fcm 403 SENDER_ID_MISMATCH: SenderId mismatch"),
        ("invalid-token", True, True, None,
         "fcm 400 INVALID_ARGUMENT: The registration token is not a valid FCM registration token"),
        ("invalid-token-field", True, True, None, "fcm 400 INVALID_ARGUMENT: Request contains an invalid argument."),
        # Payload faults: this notification fails, the device stays.
        ("message-too-big", True, False, None, "fcm 400 INVALID_ARGUMENT: Request contains an invalid argument."),
        ("invalid-data", True, False, None,
         "fcm 400 INVALID_ARGUMENT: Invalid value at 'message.data[0].value' (TYPE_STRING), 12"),
        ("invalid-argument", True, False, None, "fcm 400 INVALID_ARGUMENT: Request contains an invalid argument."),
        ("third-party-auth", True, False, None,
         "fcm 401 THIRD_PARTY_AUTH_ERROR: Auth error from APNS or Web Push Service"),
        ("429", False, False, 1.0, "fcm answered HTTP 429: "),
        ("500", False, False, 1.0, "fcm answered HTTP 503: "),
        ("internal", False, False, None, "fcm answered HTTP 500: "),
    ],
)  # fmt: skip
def test_fcm_errors_are_mapped_by_their_error_code(stub_providers, outcome, permanent, disabled, retry_after, error):
    raised = fcm_answer(stub_providers, outcome)

    assert (raised.permanent, raised.address_invalid, raised.retry_after) == (permanent, disabled, retry_after)
    assert str(raised).startswith(error)


@pytest.mark.parametrize(
    ("error", "named"),
    [
        ({"message": "The registration token is not a valid FCM registration token"}, True),
        ({"message": "x", "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                                       "fieldViolations": [{"field": "message.token"}]}]}, True),
        # A field violation elsewhere decides, whatever the message says.
        ({"message": "registration token", "details": [{"@type": "type.googleapis.com/google.rpc.BadRequest",
                                                        "fieldViolations": [{"field": "message.data"}]}]}, False),
        ({"message": "Request contains an invalid argument."}, False),
        ({"details": [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": None}]}, False),
        ({}, False),
    ],
)  # fmt: skip
def test_an_invalid_argument_names_the_token_only_by_field_or_fcms_token_message(error, named):
    assert names_the_token(error) is named


@pytest.mark.django_db
@pytest.mark.usefixtures("demo_data")
def test_a_payload_fault_fails_the_notification_and_keeps_the_device(send, stub_providers):
    recipient = Recipient.objects.get(user_id="u-ar-1")
    recipient.devices.all().delete()
    device = Device.objects.create(recipient=recipient, platform="fcm", token=TOKEN)
    stub_providers.state.faults = {"fcm": {"rules": {TOKEN: "message-too-big"}}}
    response = send({"user_id": "u-ar-1", "kind": "shipped", "params": {"order": "5012"}, "channel": "push"})

    dispatch.deliver(response.json()["id"])

    notification = Notification.objects.get(pk=response.json()["id"])
    assert (notification.state, notification.reason) == (State.FAILED, "permanent-error")
    device.refresh_from_db()
    assert (device.disabled_at, device.disabled_reason) == (None, "")
