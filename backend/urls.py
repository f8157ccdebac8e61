from django.contrib import admin
from django.http import JsonResponse
from django.urls import include, path
from django.views.decorators.http import require_GET


@require_GET
def healthz(request):
    """Liveness for nginx, the demo script and orchestrators."""
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("api/v1/", include("backend.notifications.api.urls")),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("", include("frontend.urls")),
]

handler404 = "backend.notifications.api.errors.json_not_found"
