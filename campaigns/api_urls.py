"""The campaigns' routes under /api/v1/ (included by backend/urls.py)."""

from django.urls import path

from campaigns import api

urlpatterns = [
    path("campaigns", api.CampaignCreateView.as_view(), name="campaign-create"),
    path("campaigns/<int:pk>", api.CampaignDetailView.as_view(), name="campaign-detail"),
    path("campaigns/<int:pk>/pause", api.CampaignPauseView.as_view(), name="campaign-pause"),
    path("campaigns/<int:pk>/resume", api.CampaignResumeView.as_view(), name="campaign-resume"),
    path("campaigns/<int:pk>/report.pdf", api.CampaignReportView.as_view(), name="campaign-report"),
]
