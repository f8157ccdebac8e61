from datetime import datetime, timedelta

from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET

from backend.notifications.models import Notification, StateChange
from frontend.editor.views import staff_only

VIEW_NOTIFICATIONS = "notifications.view_notification"
VIEW_TEMPLATES = "notifications.view_templateversion"
VIEW_SEGMENTS = "campaigns.view_segment"
# Every staff role holds one of these: support reads notifications, editors, approvers and marketers templates.
ANY_ROLE = (VIEW_NOTIFICATIONS, VIEW_TEMPLATES)


# Where the latest notifications are looked for, nearest first: each a trailing window of the state changes' BRIN.
RECENT_WINDOWS = (("hour", timedelta(hours=1)), ("day", timedelta(days=1)), ("week", timedelta(days=7)))
RECENT = 10


def _accepted_since(start: datetime, now: datetime) -> QuerySet[StateChange]:
    """The first state change (from "") of every notification accepted in [start, now]: the ``at`` BRIN finds them."""
    return StateChange.objects.filter(at__gte=start, at__lte=now, from_state="")


def latest(now: datetime) -> tuple[list[Notification], str]:
    """The ``RECENT`` notifications accepted last, newest first, and the window they were found in ("" if none).

    Read through their first state change in the last hour, else day, else week: the notifications
    table has no index on its age (each insert and state change would pay one), and ordering the whole
    table read all of it (about 1 s at 1,000,000 rows).
    """
    for name, span in RECENT_WINDOWS:
        ids = list(
            _accepted_since(now - span, now).order_by("-at", "-id").values_list("notification_id", flat=True)[:RECENT]
        )
        if ids:
            rows = Notification.objects.select_related("recipient", "kind").in_bulk(ids)
            return [rows[pk] for pk in ids if pk in rows], name
    return [], ""


def states_of_the_last_day(now: datetime) -> dict[str, int]:
    """What the notifications accepted in the last 24 hours are now, per state: read through the same BRIN."""
    accepted = _accepted_since(now - timedelta(days=1), now).values("notification_id")
    return dict(Notification.objects.filter(pk__in=accepted).order_by().values_list("state").annotate(n=Count("id")))


@require_GET
@staff_only(*ANY_ROLE)
def home(request: HttpRequest) -> HttpResponse:
    """The staff landing page: where the API, the editor and the admin are.

    Traffic (what the last 24 hours' notifications are now, per state, and the latest ten with their masked
    previews) only for staff who may read notifications, the editor's and the segments' links only for those
    who may open them (support may not); anonymous visitors go to the login page, staff without a role get 403.
    """
    user = request.user
    context = {
        "templates": user.has_perm(VIEW_TEMPLATES),
        "segments": user.has_perm(VIEW_SEGMENTS),
        "campaigns": user.has_perm("campaigns.view_campaign") or user.has_perm("campaigns.approve_campaign"),
    }
    if request.user.has_perm(VIEW_NOTIFICATIONS):
        now = timezone.now()
        recent, window = latest(now)
        context |= {"traffic": True, "by_state": states_of_the_last_day(now), "recent": recent, "window": window}
    response = render(request, "frontend/home.html", context)
    add_never_cache_headers(response)
    return response
