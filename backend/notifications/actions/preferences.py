"""Contact data, preferences, quiet hours, language, time zone and devices of a recipient."""

from collections.abc import Iterable
from datetime import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from backend.notifications import locales
from backend.notifications.models import (
    ApiClient,
    Category,
    Channel,
    Device,
    Kind,
    Preference,
    Recipient,
    TemplateVersion,
)


def upsert_recipient(user_id: str, data: dict[str, Any]) -> tuple[Recipient, bool]:
    """Create or replace a recipient's contact data; a changed email or phone is usable again."""
    with transaction.atomic():
        recipient = Recipient.objects.select_for_update().filter(user_id=user_id).first()
        if recipient is None:
            return Recipient.objects.create(user_id=user_id, **data), True
        if data.get("email") != recipient.email:
            recipient.email_bounced_at, recipient.email_bounce = None, ""
        if data.get("phone") != recipient.phone:
            recipient.phone_disabled_at, recipient.phone_disabled_reason = None, ""
        for field, value in data.items():
            setattr(recipient, field, value)
        recipient.save()
    return recipient, False


class PreferenceRefused(Exception):
    """A preference that cannot be set (a security kind, a channel the kind is not sent by)."""


def channels_by_kind(kinds: Iterable[Kind]) -> dict[int, list[str]]:
    """The channels each kind is sent by, by kind id (one query): its routing channels, then the others it can use.

    A caller may name any channel (``POST /api/v1/notifications`` with ``channel``), not only the
    kind's routing channels; the kind is sent by it once it has an approved template there. So each
    of those is a channel its users must be able to turn off (a preference is per kind × channel,
    DESIGN.md §2): an in-app promo is a promo too.
    """
    kinds = list(kinds)
    approved = TemplateVersion.objects.filter(kind__in=kinds, status=TemplateVersion.Status.APPROVED)
    others: dict[int, set[str]] = {}
    for kind_id, channel in approved.values_list("kind_id", "channel").distinct():
        others.setdefault(kind_id, set()).add(channel)
    order = list(Channel.values)
    return {
        kind.pk: [*kind.channels, *sorted(others.get(kind.pk, set()) - set(kind.channels), key=order.index)]
        for kind in kinds
    }


def check_preference(kind: Kind, channel: str, enabled: bool, channels: list[str] | None = None) -> None:
    """Raise ``PreferenceRefused`` unless ``kind`` on ``channel`` may be set to ``enabled``.

    ``channels`` are the kind's (``channels_by_kind``), read here when not given.
    """
    if kind.name == Kind.DIGEST:
        # It carries the messages of other kinds held back by a rate limit: off, it would drop them though
        # each of those kinds is on. Nobody sees it among their preferences (the page, the API's answer).
        raise PreferenceRefused(f"{kind.name} is not a choice of its own: it follows the kinds it gathers.")
    channels = channels_by_kind([kind])[kind.pk] if channels is None else channels
    if channel not in channels:
        raise PreferenceRefused(f"{kind.name} is not sent by {channel}; its channels are {', '.join(channels)}.")
    if not enabled and not kind.opt_out_allowed:
        raise PreferenceRefused(f"{kind.name} is a security message and cannot be turned off.")


# Who changes a preference, as the support trail names them (``Preference.changed_by``).
BY_PREFERENCE_CENTER = "the user, in the preference center"
BY_STOP_ALL_MARKETING = 'the user, with "stop all marketing" in the preference center'
BY_UNSUBSCRIBE_PAGE = "the user, on the unsubscribe page of an email"
BY_ONE_CLICK = "the user's mail client, by one-click unsubscribe (RFC 8058)"


def by_api_client(client: ApiClient | None) -> str:
    """``changed_by`` for a change made through the API by ``client``."""
    return f"API client {client.name}" if client is not None else "the API"


def set_preference(
    recipient: Recipient, kind: Kind, channel: str, enabled: bool, channels: list[str] | None = None, *, by: str
) -> Preference:
    """Turn one kind on one channel on or off for a user; security kinds cannot be turned off.

    ``channels`` as for ``check_preference``; ``by`` who changes it (``BY_…``, ``by_api_client``), which
    support reads in the trail of a notification it stopped. Raises ``PreferenceRefused``.
    """
    check_preference(kind, channel, enabled, channels)
    unchanged = Preference.objects.filter(recipient=recipient, kind=kind, channel=channel, enabled=enabled).first()
    if unchanged is not None:
        return unchanged  # who set it, and since when, stay true: a service repeating the value changed nothing
    preference, _ = Preference.objects.update_or_create(
        recipient=recipient, kind=kind, channel=channel, defaults={"enabled": enabled, "changed_by": by[:120]}
    )
    return preference


def set_marketing(recipient: Recipient, enabled: bool, *, by: str) -> int:
    """Turn every marketing kind on every channel on or off at once ("stop all marketing").

    Every channel, not only those each kind is sent by today: a template a marketer approves later on
    another channel finds the user who stopped marketing still stopped there. Security and
    transactional kinds are left as they are; a marketing kind added later starts on, as it does for
    everyone (its Preference rows do not exist yet). Each pair is set as ``set_preference`` sets one,
    every channel allowed, in one transaction. Returns the pairs set.
    """
    marketing = Kind.objects.filter(category=Category.MARKETING).exclude(name=Kind.DIGEST)  # the digest follows them
    pairs = [(kind, channel) for kind in marketing for channel in Channel.values]
    with transaction.atomic():
        for kind, channel in pairs:
            set_preference(recipient, kind, channel, enabled, Channel.values, by=by)
    return len(pairs)


def update_preferences(recipient: Recipient, data: dict[str, Any], kinds: dict[str, Kind], *, by: str) -> None:
    """Apply a validated preferences document: only the fields it has change (all or nothing); ``by`` as for
    ``set_preference``."""
    with transaction.atomic():
        set_locale(recipient, language=data.get("language"), time_zone=data.get("time_zone"))
        if "quiet_hours" in data:
            hours = data["quiet_hours"] or {}
            set_quiet_hours(recipient, hours.get("start"), hours.get("end"))
        sendable = channels_by_kind(kinds.values())
        for name, channels in data.get("channels", {}).items():
            for channel, enabled in channels.items():
                set_preference(recipient, kinds[name], channel, enabled, sendable[kinds[name].pk], by=by)


def register_device(recipient: Recipient, platform: str, token: str, subscription: dict) -> tuple[Device, bool]:
    """Register or refresh a push device; a token seen again is enabled again and belongs to this user now.

    A user keeps at most ``NOTIFY["MAX_DEVICES"]`` active devices: past that, the least recently seen
    are disabled (``retire_devices``), since every push goes to each active device, one provider call
    apiece. The user's row is locked meanwhile, so two registrations at once cannot both stay over it.
    """
    with transaction.atomic():
        Recipient.objects.select_for_update().filter(pk=recipient.pk).first()
        device, created = Device.objects.update_or_create(
            platform=platform,
            token=token,
            defaults={"recipient": recipient, "subscription": subscription, "disabled_at": None, "disabled_reason": ""},
        )
        retire_devices(recipient, settings.NOTIFY["MAX_DEVICES"])
    return device, created


def unregister_device(recipient: Recipient, token: str, by: str) -> Device | None:
    """The app signed out (or the browser unsubscribed): ``recipient``'s device ``token`` gets no more pushes.

    It is disabled, not deleted, with ``by`` in its reason, so support sees why pushes stopped; registering the
    token again enables it. Returns the device, or None when ``recipient`` has no device with that token
    (the FCM token, or a Web Push subscription's endpoint). Disabled already, it is returned as it is.
    """
    device = Device.objects.filter(recipient=recipient, token=token).first()
    if device is None or device.disabled_at is not None:
        return device
    device.disabled_at, device.disabled_reason = timezone.now(), f"unregistered by {by}"[:255]
    device.save(update_fields=["disabled_at", "disabled_reason"])
    return device


def retire_devices(recipient: Recipient, keep: int) -> int:
    """Disable all but the ``keep`` most recently seen active devices; delete disabled ones past ``keep``.

    A browser or an app reinstall brings a new token and seldom says the old one is gone, so
    tokens pile up; a provider's "unregistered" disables one only once a push was tried. Disabled
    devices are kept for support (the reason says why) but no more of them than ``keep``, the
    oldest deleted first (their attempts keep their rows, the device left empty). Returns how many
    were disabled.
    """
    devices = Device.objects.filter(recipient=recipient)
    stale = devices.filter(disabled_at__isnull=True).order_by("-last_seen_at", "-pk").values_list("pk", flat=True)
    retired = devices.filter(pk__in=list(stale[keep:])).update(
        disabled_at=timezone.now(),
        disabled_reason=f"retired: more than {keep} active devices, and this one the least recently seen",
    )
    gone = devices.filter(disabled_at__isnull=False).order_by("-disabled_at", "-pk").values_list("pk", flat=True)
    devices.filter(pk__in=list(gone[keep:])).delete()
    return retired


def set_quiet_hours(recipient: Recipient, start: time | None, end: time | None) -> Recipient:
    """Set the user's quiet hours (local wall times, e.g. 22:00–07:00) or turn them off with ``None, None``.

    Raises ``PreferenceRefused`` for half a window or an empty one (start == end).
    """
    if (start is None) != (end is None):
        raise PreferenceRefused("Quiet hours need both a start and an end time (or neither, to turn them off).")
    if start is not None and start == end:
        raise PreferenceRefused("Quiet hours must end at a different time than they start.")
    recipient.quiet_hours_start, recipient.quiet_hours_end = start, end
    recipient.save(update_fields=["quiet_hours_start", "quiet_hours_end", "updated_at"])
    return recipient


def set_locale(recipient: Recipient, *, language: str | None = None, time_zone: str | None = None) -> Recipient:
    """Change the user's language (ISO 639-1) and/or time zone (IANA); ``None`` leaves one as it is.

    Raises ``PreferenceRefused`` for a code or name Django or tzdata does not know.
    """
    fields = []
    if language is not None:
        code = locales.language_of(language)
        if code is None:
            raise PreferenceRefused(f"Unknown language code {language!r}; use an ISO 639-1 code such as en, ar or fa.")
        recipient.language = code
        fields.append("language")
    if time_zone is not None:
        if time_zone not in locales.time_zone_names():
            raise PreferenceRefused(f"Unknown time zone {time_zone!r}; use an IANA name such as Asia/Riyadh.")
        recipient.time_zone = time_zone
        fields.append("time_zone")
    if fields:
        recipient.save(update_fields=[*fields, "updated_at"])
    return recipient
