"""``/support/``: the support explorer (``frontend/support/views.py``)."""

from django.urls import path

from frontend.support import views

app_name = "support"

urlpatterns = [
    path("", views.search_page, name="search"),
    path("export.csv", views.export_csv, name="export-csv"),
    path("notifications/<uuid:pk>/", views.notification_page, name="notification"),
    path("notifications/<uuid:pk>/history.pdf", views.notification_pdf, name="notification-pdf"),
    path("notifications/<uuid:pk>/replay", views.replay, name="replay"),
    # A user id may hold "/" (the API takes any printable id): the longer routes first.
    path("users/<path:user_id>/history.pdf", views.user_pdf, name="user-pdf"),
    path("users/<path:user_id>/reveal/<str:field>", views.reveal_contact, name="reveal"),
    path("users/<path:user_id>/", views.user_page, name="user"),
]
