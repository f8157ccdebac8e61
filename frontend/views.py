from django.db.models import Count
from django.shortcuts import render
from django.views.decorators.http import require_GET

from backend.notifications.models import Notification


@require_GET
def home(request):
    """The landing page: what runs here, where the API and the admin are, recent traffic."""
    by_state = dict(Notification.objects.order_by().values_list("state").annotate(n=Count("id")))
    recent = Notification.objects.select_related("recipient", "kind")[:10]
    return render(request, "frontend/home.html", {"by_state": by_state, "recent": recent})
