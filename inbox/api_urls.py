"""The inbox's routes under /api/v1/ (included by backend/urls.py)."""

from django.urls import path

from inbox import api

urlpatterns = [
    path("users/<str:user_id>/inbox-token", api.InboxTokenView.as_view(), name="inbox-token"),
    path("users/<str:user_id>/inbox", api.InboxView.as_view(), name="inbox"),
    path("users/<str:user_id>/inbox/read-all", api.ReadAllView.as_view(), name="inbox-read-all"),
    path("users/<str:user_id>/inbox/<int:message_id>/read", api.MessageReadView.as_view(), name="inbox-read"),
    path("users/<str:user_id>/inbox/<int:message_id>/archive", api.MessageArchiveView.as_view(), name="inbox-archive"),
]
