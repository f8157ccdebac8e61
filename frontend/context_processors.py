"""Template context every page gets."""

from django.conf import settings
from django.http import HttpRequest


def brand(request: HttpRequest) -> dict[str, str]:
    """``brand_name`` and ``brand_logo_url`` (``NOTIFY_BRAND_NAME``, ``NOTIFY_BRAND_LOGO_URL``; "" for no logo)."""
    return {"brand_name": settings.BRAND_NAME, "brand_logo_url": settings.BRAND_LOGO_URL}
