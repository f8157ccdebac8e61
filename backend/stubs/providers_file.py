"""A providers file (TOML) pointing every SMS and push adapter at the local stub server.

One writer for the demo (``manage.py demo_providers``), the tests and the
benchmarks; the format is README's "Providers file".
"""

from typing import Any

from backend.notifications.providers.webpush import generate_vapid_private_key
from backend.stubs.provider_server import VONAGE_SIGNATURE

DEFAULT_ROUTES = {"sms": ["twilio", "vonage"], "push": ["fcm", "webpush"]}


def stub_providers_toml(
    stub_url: str,
    timeout: float,
    routes: dict[str, list[str]] | None = None,
    callback_base: str = "",
    **overrides: dict[str, Any],
) -> str:
    """Twilio (primary) and Vonage (backup) for SMS, FCM and Web Push for push, all at ``stub_url``.

    ``timeout`` is seconds per call; ``callback_base`` (the service's URL as the stub reaches it, ""
    for none) makes the SMS providers ask for delivery receipts at its /webhooks/; ``overrides`` adds
    or replaces options per provider, e.g. ``twilio={"rate": 50, "high_share": 0.3}``.
    """
    providers: dict[str, dict[str, Any]] = {
        "twilio": {"type": "twilio", "base_url": stub_url, "account_sid": "ACstub", "auth_token": "stub",
                   "from": "+15005550006"},
        "vonage": {"type": "vonage", "base_url": stub_url, "api_key": "stub", "api_secret": "stub",
                   "from": "Notify", "signature_secret": VONAGE_SIGNATURE[0],
                   "signature_method": VONAGE_SIGNATURE[1]},
        "fcm": {"type": "fcm", "base_url": stub_url, "project_id": "demo", "access_token": "stub"},
        "webpush": {"type": "webpush", "vapid_private_key": generate_vapid_private_key(),
                    "vapid_subject": "mailto:ops@example.com"},
    }  # fmt: skip
    if callback_base:
        providers["twilio"]["status_callback"] = f"{callback_base.rstrip('/')}/webhooks/twilio"
        providers["vonage"]["callback"] = f"{callback_base.rstrip('/')}/webhooks/vonage"
    lines = ["[channels]"]
    lines += [
        f"{channel} = [{', '.join(_value(n) for n in names)}]" for channel, names in (routes or DEFAULT_ROUTES).items()
    ]
    for name, table in providers.items():
        lines += ["", f"[providers.{name}]"]
        lines += [
            f"{key} = {_value(value)}"
            for key, value in {**table, "timeout": timeout, **overrides.get(name, {})}.items()
        ]
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
