"""The "Send a test to me" action: a version rendered with values a staff member typed, sent only to them.

A test is no notification: no ``Notification`` row, so no rate limit, preference,
quiet hours, budget or statistic sees it, and no support search finds it. It goes
to the staff member's own address only: the email of their Django user, or the
phone and inbox of their ``StaffContact`` (set by an administrator). It is marked
as a test (``TEST_MARK`` before the subject or the text, and the mail header
``X-Notify-Test: 1``), throttled (``TEST_LIMIT`` per ``TEST_WINDOW`` and
person, counted in the history, failed tries included) and recorded in the
template's history with each secret param masked.
"""

import json
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from backend.notifications import email_footer, masking, rendering
from backend.notifications.actions.templates import record_event
from backend.notifications.masking import mask_email, mask_phone
from backend.notifications.models import Category, Channel, StaffContact, TemplateEvent, TemplateVersion
from backend.notifications.providers.base import OutboundMessage, ProviderError, provider_for_channel

logger = logging.getLogger(__name__)

# Who may send a test of a template: its writers and its approvers (default deny for everyone else).
MAY_TEST = ("notifications.change_templateversion", "notifications.approve_templateversion")
TEST_MARK = "[TEST] "
# Tests per person and window: enough to try a few values, too few to use the editor as a free SMS gateway.
TEST_LIMIT = 5
TEST_WINDOW = timedelta(minutes=10)
# The longest typed value of a param that declares no max_length, in characters.
MAX_TYPED_CHARS = 500


class TestRefused(Exception):
    """The test cannot be sent; the message says why. ``status`` is the HTTP status a page answers with."""

    __test__ = False  # not a pytest test class

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class TestSent:
    """A test handed to its provider: where (masked) and the history row that records it."""

    __test__ = False

    to: str
    event: TemplateEvent


def may_send_tests(user) -> bool:
    """Active staff who write or approve templates."""
    return user.is_active and user.is_staff and any(user.has_perm(perm) for perm in MAY_TEST)


def own_address(user, channel: str) -> str:
    """The staff member's own address on ``channel``; raises ``TestRefused`` naming what is missing."""
    if channel == Channel.EMAIL:
        if not user.email:
            raise TestRefused("Your account has no email address: ask an administrator to add it.")
        return user.email
    contact = StaffContact.objects.filter(user=user).first()
    if channel == Channel.SMS:
        if contact is None or not contact.phone:
            raise TestRefused("Your account has no phone number: ask an administrator to add it (Staff contacts).")
        return contact.phone
    if channel == Channel.INAPP:
        if contact is None or not contact.inbox_user_id:
            raise TestRefused("Your account names no inbox: ask an administrator to add it (Staff contacts).")
        return contact.inbox_user_id
    raise TestRefused(f"A test goes by email, SMS or in-app inbox; {channel} needs a device and is not offered.")


def masked_address(channel: str, address: str) -> str:
    """The address as pages and the history show it: ``s•••@example.com``, ``+1415••••123``, an inbox id as is."""
    return {Channel.EMAIL: mask_email, Channel.SMS: mask_phone}.get(channel, str)(address)


def checked_params(version: TemplateVersion, typed: dict[str, str]) -> dict[str, str | list[str]]:
    """The typed values of the params ``version``'s kind declares, each within its ``max_length`` (characters).

    Raises ``TestRefused`` for an undeclared name, a value too long or not valid text.
    """
    declared = version.kind.params
    unknown = sorted(set(typed) - set(declared))
    if unknown:
        raise TestRefused(f"{version.kind.name} has no param {', '.join(unknown)}.")
    checked: dict[str, str | list[str]] = {}
    for name, value in typed.items():
        limit = declared[name].get("max_length") or MAX_TYPED_CHARS
        if len(value) > limit:
            raise TestRefused(f"{name}: at most {limit} characters.")
        problem = rendering.text_problem(value)
        if problem:
            raise TestRefused(f"{name}: {problem}")
        checked[name] = _as_list(name, value) if isinstance(declared[name].get("example"), list) else value
    return checked


def _as_list(name: str, value: str) -> list[str]:
    """A list param (its example is a list, e.g. a digest's items) is typed as a JSON list of texts."""
    try:
        items = json.loads(value)
    except (ValueError, RecursionError):
        items = None
    if not (isinstance(items, list) and all(isinstance(item, str) for item in items)):
        raise TestRefused(f'{name}: type a JSON list of texts, e.g. ["first", "second"].')
    return items


def send_test_to_self(version: TemplateVersion, user, typed: dict[str, str]) -> TestSent:
    """Render ``version`` with ``typed`` params and send it, marked as a test, to ``user``'s own address.

    Raises ``TestRefused``: 403 without the permission, 429 past the throttle
    (the message says when to try again), 400 for a missing address, bad
    params, a template that does not render, or no provider, 502 when the
    provider refused. The history row is written before the provider is
    called (a try counts towards the throttle whatever happens) and given the
    outcome after.
    """
    if not may_send_tests(user):
        raise TestRefused(f"{user.get_username()} may not send tests of templates.", status=403)
    address = own_address(user, version.channel)
    params = checked_params(version, typed)
    try:
        rendered = rendering.render(version, params)
    except rendering.RenderError as exc:
        raise TestRefused(f"{version} does not render with these values: {exc}") from exc
    if version.channel == Channel.EMAIL and version.kind.category == Category.MARKETING:
        # What a recipient gets, footer included (email_footer), its links samples: the test is nobody's.
        rendered = email_footer.with_footer(rendered, None, [version.kind], version.language)
    provider = provider_for_channel(version.channel)
    if provider is None:
        raise TestRefused(f"No provider is configured for {version.channel}.")
    event = _claim_a_try(version, user, address, params)
    outcome = _hand_over(provider, _message(version, event, address, rendered), version, params)
    TemplateEvent.objects.filter(pk=event.pk).update(detail={**event.detail, **outcome})
    event.detail.update(outcome)
    if "error" in outcome:
        raise TestRefused(f"The test was not sent: {outcome['error']}", status=502)
    return TestSent(event.detail["to"], event)


def _claim_a_try(version: TemplateVersion, user, address: str, params: dict) -> TemplateEvent:
    """The history row of this try, once the throttle allows it; raises ``TestRefused`` (429) when it does not.

    The user's row is locked so two tries at once cannot both take the last place.
    """
    now = timezone.now()
    with transaction.atomic():
        get_user_model().objects.select_for_update(no_key=True).only("pk").get(pk=user.pk)
        recent = TemplateEvent.objects.filter(actor=user, action=TemplateEvent.Action.TEST, at__gt=now - TEST_WINDOW)
        times = sorted(recent.values_list("at", flat=True))
        if len(times) >= TEST_LIMIT:
            wait = times[-TEST_LIMIT] + TEST_WINDOW - now
            minutes = max(1, -(-int(wait.total_seconds()) // 60))
            raise TestRefused(
                f"You sent {TEST_LIMIT} tests in the last {TEST_WINDOW.seconds // 60} minutes: "
                f"try again in {minutes} minute{'s' if minutes != 1 else ''}.",
                status=429,
            )
        detail = {
            "channel": version.channel,
            "to": masked_address(version.channel, address),
            "params": masking.masked_params(version.kind, params),
        }
        return record_event(version, user, TemplateEvent.Action.TEST, detail=detail)


def _message(version: TemplateVersion, event: TemplateEvent, address: str, rendered) -> OutboundMessage:
    """What the provider gets: the rendered version with ``TEST_MARK`` before its subject, or its text if none."""
    subject, text = rendered.subject, rendered.text
    if version.channel == Channel.EMAIL or subject:
        subject = TEST_MARK + subject
    else:
        text = TEST_MARK + text
    return OutboundMessage(
        notification_id=f"template-test-{event.pk}",
        channel=version.channel,
        to=address,
        subject=subject,
        text=text,
        html=rendered.html,
        language=version.language,
        headers={"X-Notify-Test": "1"} if version.channel == Channel.EMAIL else {},
    )


def _hand_over(provider, message: OutboundMessage, version: TemplateVersion, params: dict) -> dict:
    """Send ``message``; returns ``{"provider", "reference"}`` or ``{"provider", "error"}`` (secrets masked)."""
    try:
        inbox = message.channel == Channel.INAPP
        reference = _into_inbox(message, version) if inbox else provider.send(message)
    except ProviderError as exc:
        return {"provider": provider.name, "error": masking.redact(str(exc), version.kind, params)}
    except Exception as exc:  # a bug or an odd answer must end as a recorded failure, not a 500
        logger.error("template test %s: %s raised %s", message.notification_id, provider.name, type(exc).__name__)
        return {"provider": provider.name, "error": f"{provider.name} raised {type(exc).__name__}"}
    return {"provider": provider.name, "reference": reference}


def _into_inbox(message: OutboundMessage, version: TemplateVersion) -> str:
    """The inbox provider reads its notification row, which a test has not: write the message directly."""
    from inbox import actions as inbox_actions
    from inbox.provider import title_and_body

    title, body = title_and_body(message.subject, message.text)
    new = inbox_actions.NewMessage(
        notification_id=None, user_id=message.to, kind=version.kind.name, language=message.language,
        title=title, body=body,
    )  # fmt: skip
    try:
        stored, _ = inbox_actions.deliver(new)
    except inbox_actions.UnknownUser as exc:
        raise ProviderError(f"inbox: no user {message.to!r}", permanent=True) from exc
    return f"inbox:{stored.pk}"
