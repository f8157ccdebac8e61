"""The reveal audit in the admin: read-only for everyone, the superuser included (``notifications.admin.ReadOnly``)."""

from django.contrib import admin

from backend.notifications.admin import ReadOnly
from backend.support.models import ContactReveal


@admin.register(ContactReveal)
class ContactRevealAdmin(ReadOnly, admin.ModelAdmin):
    """Who revealed which user's phone or email, when, and on which notification's page."""

    list_display = ("at", "username", "recipient_user_id", "field", "reason", "notification_id")
    list_filter = ("field",)
    search_fields = ("=username", "=recipient_user_id", "reason")
    date_hierarchy = "at"
