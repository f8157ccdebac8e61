"""The delivery-receipt webhooks under /webhooks/ (backend/urls.py)."""

from django.urls import path

from backend.notifications.receipts import views

app_name = "receipts"

urlpatterns = [
    path("twilio", views.twilio_receipt, name="twilio"),
    path("vonage", views.vonage_receipt, name="vonage"),
]
