"""Contact data shown to people (``mask_phone``, ``mask_email``, ``mask_push_token``), and secret params.

Secret params (OTP codes): the kind declares them, and staff, logs and API reads see ``MASK`` instead.

A kind marks a param secret in its spec: ``{"code": {"example": "482913", "max_length": 8,
"secret": true}}``. Besides the message the provider receives (for ``inapp`` that is the inbox
message itself), the clear value is kept in one place only, ``Notification.params``, and only while
the notification may still be sent: the worker renders the message from it at send time. Everything
else a person or a log can see is masked here:

- the stored preview (and so the digest items copied from it) is rendered with ``MASK`` in place
  of each secret value (``masked_preview``), never the real text with the code cut out afterwards:
  a code that also appears elsewhere, or only in part, cannot slip through;
- the admin and the API show ``masked_params``;
- provider error text, which may echo the message back, is ``redact``-ed before it is stored on an
  attempt, the notification or a dead letter, or logged;
- once nothing can send the notification again (sent, expired, suppressed, failed without a dead
  letter) ``params`` itself is replaced by ``masked_params`` (``actions.delivery``). A dead letter
  keeps the code: a replay within the kind's validity renders it again.
"""

from typing import Any
from urllib.parse import urlsplit

from backend.notifications import rendering
from backend.notifications.models import Kind, TemplateVersion

MASK = "••••••"

# The longest preview stored on a notification, in characters (Notification.preview).
PREVIEW_CHARS = 200


def secret_names(kind: Kind) -> frozenset[str]:
    """The names of the params ``kind`` declares ``"secret": true``."""
    return frozenset(name for name, spec in kind.params.items() if spec.get("secret") is True)


def masked_params(kind: Kind, params: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``params`` with each secret param's value (text, number, list or object) replaced by ``MASK``."""
    secrets = secret_names(kind)
    return {name: MASK if name in secrets else value for name, value in params.items()}


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def redact(text: str, kind: Kind, params: dict[str, Any]) -> str:
    """``text`` with every occurrence of a secret param's value replaced by ``MASK``.

    For text the platform did not write itself (a provider's error that may quote the message
    back); what the platform renders is rendered masked instead (``masked_preview``). Longer values
    go first, so a code that contains another is masked whole.
    """
    values = {leaf for name in secret_names(kind) for leaf in _leaves(params.get(name)) if leaf}
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def masked_preview(
    version: TemplateVersion, kind: Kind, params: dict[str, Any], rendered: rendering.Rendered | None = None
) -> str:
    """The start of the message (subject, else text) as staff may see it.

    ``rendered``, the real rendering when the caller has one, is reused for a kind without secret
    params; otherwise the version is rendered with ``masked_params``. A template that cannot render
    the mask (arithmetic on a code) previews as ``MASK`` alone rather than risk the real text.
    Raises ``rendering.RenderError`` only for a kind without secrets whose version does not render.
    """
    if secret_names(kind):
        try:
            rendered = rendering.render(version, masked_params(kind, params), document=False)
        except rendering.RenderError:
            return MASK
    elif rendered is None:
        rendered = rendering.render(version, params, document=False)
    return (rendered.subject or rendered.text)[:PREVIEW_CHARS]


def mask_phone(phone: str) -> str:
    """``+966512345567`` → ``+9665••••567``: the country and first digit, then the last three."""
    if len(phone) <= 8:
        return "••••" if phone else ""
    return f"{phone[:5]}••••{phone[-3:]}"


def mask_email(email: str) -> str:
    """``layla@example.com`` → ``l•••@example.com``: the first character and the domain."""
    local, at, domain = email.rpartition("@")
    if not at:
        return "•••" if email else ""
    return f"{local[:1]}•••@{domain}"


def mask_push_token(platform: str, token: str) -> str:
    """A push device's token as staff see it: ``•••`` and its last six characters.

    An FCM registration token (``fcm``) is an address anyone holding the project's server key can push
    to; a Web Push endpoint (``webpush``) is a capability URL. Neither is shown whole to staff: the last
    six characters tell two devices apart, and for Web Push the push service's host is kept too
    (``https://fcm.googleapis.com/•••x1y2z3``), which says whose service it is.
    """
    if len(token) <= 12:
        return "•••" if token else ""
    tail = f"•••{token[-6:]}"
    if platform == "webpush":
        parts = urlsplit(token)
        if parts.scheme and parts.hostname:
            return f"{parts.scheme}://{parts.hostname}/{tail}"
    return tail
