"""The navigation's "Awaiting approval" counts: template drafts and campaigns waiting for the person looking."""

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from backend.notifications.actions.templates import APPROVE

register = template.Library()
APPROVE_CAMPAIGN = "campaigns.approve_campaign"


@register.simple_tag(takes_context=True)
def awaiting_approval_link(context) -> str:
    """What waits for this approver, one link and one COUNT per kind they may approve; "" for anyone else.

    Templates (``/templates/awaiting/``) and campaigns (``/campaigns/``, where their state says
    "Submitted") each have their own approve permission and page, so each has its own count.
    """
    request = context.get("request")
    user = getattr(request, "user", None)
    if user is None or not (user.is_authenticated and user.is_active and user.is_staff):
        return ""
    links = []
    if user.has_perm(APPROVE):
        from frontend.editor.review import waiting_for

        links.append(("frontend:templates-awaiting", "nav-awaiting", "templates", waiting_for(user).count()))
    if user.has_perm(APPROVE_CAMPAIGN):
        from campaigns.actions import awaiting_approval

        links.append(("frontend:campaigns", "nav-awaiting-campaigns", "campaigns", awaiting_approval(user).count()))
    if not links:
        return ""
    link = '<a href="{}" id="{}">{} <span class="nav-count" title="{} {} waiting">{}</span></a> '
    rows = ((reverse(url), id_, label, count, label, count) for url, id_, label, count in links)
    return format_html("Awaiting approval: {}", format_html_join("", link, rows))
