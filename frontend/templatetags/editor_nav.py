"""The navigation's "Awaiting approval" link with the number of template drafts waiting for the person looking."""

from django import template
from django.urls import reverse
from django.utils.html import format_html

from backend.notifications.actions.templates import APPROVE

register = template.Library()


@register.simple_tag(takes_context=True)
def awaiting_approval_link(context) -> str:
    """The link and its count (one COUNT query) for active staff with the approve permission; "" for anyone else."""
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not (user.is_authenticated and user.is_active and user.is_staff and user.has_perm(APPROVE)):
        return ""
    from frontend.editor.review import waiting_for

    count = waiting_for(user).count()
    link = '<a href="{}" id="nav-awaiting">Awaiting approval <span class="nav-count" title="{} waiting">{}</span></a> '
    return format_html(link, reverse("frontend:templates-awaiting"), count, count)
