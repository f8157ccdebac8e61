from django.contrib import admin
from django.urls import include, path, re_path

from backend.health import healthz, readyz
from backend.notifications.api.errors import api_not_found

urlpatterns = [
    path("api/v1/", include("backend.notifications.api.urls")),
    path("api/v1/", include("inbox.api_urls")),
    path("api/v1/", include("campaigns.api_urls")),
    path("inbox/", include("inbox.urls")),
    path("support/", include("frontend.support.urls")),
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("", include("frontend.urls")),
    # Last: every other /api/ URL answers JSON, whatever DEBUG says.
    re_path(r"^api/", api_not_found),
]

handler400 = "backend.notifications.api.errors.json_bad_request"
handler404 = "backend.notifications.api.errors.json_not_found"
handler500 = "backend.notifications.api.errors.json_server_error"
