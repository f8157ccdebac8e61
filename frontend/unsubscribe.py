"""One-click unsubscribe (RFC 8058) for marketing email, and the page behind the same link.

Marketing mail carries ``List-Unsubscribe: <https://…/unsubscribe/TOKEN>, <mailto:…>`` and
``List-Unsubscribe-Post: List-Unsubscribe=One-Click`` (``links.unsubscribe_headers``).

* ``POST`` with the body ``List-Unsubscribe=One-Click`` is what a mail client sends when the
  person presses its Unsubscribe button: that kind's email goes off with no page, no login and
  no CSRF token (the client posts from elsewhere; the signed token is the credential).
* ``GET`` changes nothing. Mail software fetches URLs in headers by itself, which is exactly why
  RFC 8058 moved the one click to POST (its abstract). The page asks, with one button; once off
  it says "You won't get … emails any more", with Undo.

The token is scoped: it reaches only these pages for its (user, kind, channel). It never opens the
preference center (its own salt, ``links``), and the page hands out no preference-center link, so a
forwarded marketing mail cannot be turned into access to every setting of its reader.
"""

from contextlib import suppress

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from backend.notifications import actions, links
from backend.notifications.models import Kind, Preference, Recipient
from frontend.preferences import CHANNEL_LABELS, kind_label
from frontend.signed_pages import for_person, render_page

ONE_CLICK = ("List-Unsubscribe", "One-Click")

unsubscribe_page = for_person(lambda token: links.unsubscribe_target(token).user_id)


def _plain(text: str, status: int) -> HttpResponse:
    return HttpResponse(f"{text}\n", status=status, content_type="text/plain; charset=utf-8")


def _set(recipient: Recipient, target: links.Unsubscribe, enabled: bool, by: str) -> Kind | None:
    """Switch the token's kind × channel (``by``: who, for the support trail); None when the kind no longer exists.

    Raises ``PreferenceRefused``.
    """
    kind = Kind.objects.filter(name=target.kind).first()
    if kind is not None:
        actions.set_preference(recipient, kind, target.channel, enabled, by=by)
    return kind


def _one_click(request: HttpRequest, token: str) -> HttpResponse:
    """RFC 8058 §3.2: the body must be exactly ``List-Unsubscribe=One-Click``; answer briefly, never redirect."""
    if request.POST.get(ONE_CLICK[0]) != ONE_CLICK[1]:
        return _plain("Expected the body List-Unsubscribe=One-Click (RFC 8058).", 400)
    try:
        target = links.unsubscribe_target(token)
    except links.LinkError as exc:
        return _plain(str(exc), 410 if exc.expired else 400)
    recipient = Recipient.objects.filter(user_id=target.user_id).first()
    if recipient is None or links.issued_before(token, recipient.created_at):  # erased, maybe made again since
        return _plain("No such subscriber.", 404)
    try:
        kind = _set(recipient, target, enabled=False, by=actions.BY_ONE_CLICK)
    except actions.PreferenceRefused as exc:
        return _plain(str(exc), 400)
    if kind is None:
        return _plain("No such kind of message.", 404)
    return _plain("Unsubscribed.", 200)


def _page(request: HttpRequest, recipient: Recipient, token: str, undone: bool = False) -> HttpResponse:
    target = links.unsubscribe_target(token)
    kind = Kind.objects.filter(name=target.kind).first()
    enabled = (
        Preference.objects.filter(recipient=recipient, kind=kind, channel=target.channel)
        .values_list("enabled", flat=True)
        .first()
    )
    if kind is None or not kind.opt_out_allowed:
        state = "gone" if kind is None else "locked"
    else:
        state = "off" if enabled is False else "on" if undone else "ask"
    context = {
        "state": state,
        "token": token,
        "kind": kind_label(kind) if kind else target.kind,
        "email": target.channel == "email",
        "channel": str(CHANNEL_LABELS.get(target.channel, target.channel)),
    }
    return render_page(request, "frontend/unsubscribe.html", context)


@csrf_exempt  # only the one-click POST: mail clients post without our cookie; the signed token is the credential
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest, token: str) -> HttpResponse:
    if request.method == "POST":
        return _one_click(request, token)
    return _show(request, token)


@unsubscribe_page
def _show(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    return _page(request, recipient, token, undone=request.GET.get("done") == "on")


def _change(request: HttpRequest, recipient: Recipient, token: str, enabled: bool) -> HttpResponse:
    with suppress(actions.PreferenceRefused):  # a security kind: the page says it is locked
        _set(recipient, links.unsubscribe_target(token), enabled, actions.BY_UNSUBSCRIBE_PAGE)
    url = reverse("frontend:unsubscribe", args=[token])
    return redirect(f"{url}?done={'on' if enabled else 'off'}")


@require_POST
@unsubscribe_page
def confirm(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    """The page's Unsubscribe button (a person, with CSRF protection)."""
    return _change(request, recipient, token, enabled=False)


@require_POST
@unsubscribe_page
def undo(request: HttpRequest, recipient: Recipient, token: str) -> HttpResponse:
    """The page's Undo button: the kind's email is on again."""
    return _change(request, recipient, token, enabled=True)
