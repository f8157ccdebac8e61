from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET

from backend.notifications.models import Notification
from frontend.editor.views import staff_only

VIEW_NOTIFICATIONS = "notifications.view_notification"
VIEW_TEMPLATES = "notifications.view_templateversion"
VIEW_SEGMENTS = "campaigns.view_segment"
# Every staff role holds one of these: support reads notifications, editors, approvers and marketers templates.
ANY_ROLE = (VIEW_NOTIFICATIONS, VIEW_TEMPLATES)


@require_GET
@staff_only(*ANY_ROLE)
def home(request: HttpRequest) -> HttpResponse:
    """The staff landing page: where the API, the editor and the admin are.

    Traffic (counts by state, the latest notifications with their masked previews) only for staff
    who may read notifications, the editor's and the segments' links only for those who may open them (support may not);
    anonymous visitors go to the login page, staff without a role get 403.
    """
    user = request.user
    context = {
        "templates": user.has_perm(VIEW_TEMPLATES),
        "segments": user.has_perm(VIEW_SEGMENTS),
        "campaigns": user.has_perm("campaigns.view_campaign") or user.has_perm("campaigns.approve_campaign"),
    }
    if request.user.has_perm(VIEW_NOTIFICATIONS):
        by_state = dict(Notification.objects.order_by().values_list("state").annotate(n=Count("id")))
        recent = Notification.objects.select_related("recipient", "kind")[:10]
        context |= {"traffic": True, "by_state": by_state, "recent": recent}
    response = render(request, "frontend/home.html", context)
    add_never_cache_headers(response)
    return response
