"""The admin site: Django's, with its autocomplete endpoint answering only for fields that declare it.

Django's ``/admin/autocomplete/`` searches any registered model that has ``search_fields``, for any
foreign key pointing at it, whatever ``autocomplete_fields`` say. Here no admin declares one, so it
only gave a way around the notification list's default time window (a substring search over every
notification ever kept) and around list-only masking. It now answers 403 unless the source admin
lists the field in ``autocomplete_fields``, as an admin that wants the widget would.
"""

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.contrib.admin.sites import NotRegistered
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse


class NotifyAdminSite(admin.AdminSite):
    """``admin.site`` (``NotifyAdminConfig.default_site``) with the autocomplete endpoint refused where undeclared."""

    def autocomplete_view(self, request: HttpRequest) -> HttpResponse:
        """Django's autocomplete, for a field its model's admin declares in ``autocomplete_fields``; else 403."""
        params = request.GET
        try:
            model = apps.get_model(params.get("app_label", ""), params.get("model_name", ""))
            model_admin = self.get_model_admin(model)
        except (LookupError, ValueError, NotRegistered):
            raise PermissionDenied from None
        if params.get("field_name") not in model_admin.get_autocomplete_fields(request):
            raise PermissionDenied
        return super().autocomplete_view(request)


class NotifyAdminConfig(AdminConfig):
    """``django.contrib.admin`` with ``NotifyAdminSite`` as ``admin.site``."""

    default_site = "backend.admin_site.NotifyAdminSite"
