from django.contrib import admin
from django.urls import include, path, re_path

from backend.health import healthz, readyz
from backend.notifications.api.errors import api_not_found
from backend.notifications.metrics import metrics
from frontend.error_pages import favicon

urlpatterns = [
    path("api/v1/", include("backend.notifications.api.urls")),
    path("api/v1/", include("inbox.api_urls")),
    path("api/v1/", include("campaigns.api_urls")),
    path("inbox/", include("inbox.urls")),
    path("support/", include("frontend.support.urls")),
    path("admin/", admin.site.urls),
    # Delivery receipts from the SMS providers: signed, no login (receipts/views.py).
    path("webhooks/", include("backend.notifications.receipts.urls")),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("favicon.ico", favicon, name="favicon"),
    path("metrics", metrics, name="metrics"),
    path("support/dashboard/", include("frontend.dashboard.urls")),
    path("", include("frontend.urls")),
    # Last: every other /api/ URL answers JSON, whatever DEBUG says.
    re_path(r"^api/", api_not_found),
]

handler400 = "backend.notifications.api.errors.json_bad_request"
# JSON under /api/, pages in the visitor's language elsewhere (frontend/error_pages.py).
handler403 = "frontend.error_pages.forbidden"
handler404 = "frontend.error_pages.not_found"
handler500 = "frontend.error_pages.server_error"
