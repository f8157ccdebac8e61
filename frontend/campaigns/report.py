"""The staff page of a campaign's PDF report: ``/campaigns/<id>/report.pdf`` (``campaigns/report.py`` makes it).

Marketers and approvers (``campaigns.view_campaign``) and support agents
(``notifications.view_notification``: they answer for what was sent) may read it;
other staff get 403 and anonymous visitors the login page.
"""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from campaigns import report
from frontend.editor.views import staff_only

READERS = ("campaigns.view_campaign", "notifications.view_notification")


@require_GET
@staff_only(*READERS)
def campaign_report(request: HttpRequest, pk: int) -> HttpResponse:
    """Campaign ``pk``'s report as a PDF download; 404 for an unknown id."""
    campaign = get_object_or_404(report.CAMPAIGNS, pk=pk)
    return report.pdf_response(campaign)
