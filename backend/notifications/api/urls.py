from django.urls import path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularSwaggerSplitView

from backend.notifications.api import batch, listing, preferences, sms, user_settings, views

urlpatterns = [
    path("notifications", listing.NotificationsView.as_view(), name="notification-create"),
    path("notifications/batch", batch.NotificationBatchView.as_view(), name="notification-batch"),
    path("notifications/<uuid:pk>", views.NotificationDetailView.as_view(), name="notification-detail"),
    path("notifications/<uuid:pk>/cancel", listing.NotificationCancelView.as_view(), name="notification-cancel"),
    path("users/<str:user_id>", views.RecipientView.as_view(), name="user"),
    path("users/<str:user_id>/preferences", user_settings.PreferencesView.as_view(), name="user-preferences"),
    path("users/<str:user_id>/devices", user_settings.DevicesView.as_view(), name="user-devices"),
    path(
        "users/<str:user_id>/devices/unregister",
        user_settings.DeviceUnregisterView.as_view(),
        name="user-device-unregister",
    ),
    path("users/<str:user_id>/preference-link", preferences.PreferenceLinkView.as_view(), name="preference-link"),
    path("sms/segments", sms.SmsSegmentsView.as_view(), name="sms-segments"),
    path(
        "openapi.json",
        SpectacularJSONAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="openapi",
    ),
    # The split view serves Swagger UI's start-up script as a file (docs?script=): no inline script for the CSP.
    path(
        "docs",
        # GET only: OPTIONS made the Swagger page render its HTML template without a name (500).
        SpectacularSwaggerSplitView.as_view(
            url_name="openapi", authentication_classes=[], permission_classes=[], http_method_names=["get", "head"]
        ),
        name="api-docs",
    ),
]
