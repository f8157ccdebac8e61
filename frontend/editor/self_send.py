"""The "Send a test to me" form on a version's page: parse the typed values, call ``actions.send_to_self``, answer.

The values are fields named ``param-<name>`` for each param the kind declares.
A secret param's value is never shown again (the page's field is a password
field and stays empty after a refusal); the history records it masked.
"""

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from backend.notifications import masking
from backend.notifications.actions import send_to_self
from backend.notifications.models import TemplateVersion
from frontend.editor.views import _draft_of, _editor_context, _page, staff_only

FIELD_PREFIX = "param-"


def typed_params(request: HttpRequest, version: TemplateVersion) -> dict[str, str]:
    """The declared params' values as typed (CRLF made LF); names the kind does not declare are not read."""
    return {
        name: request.POST[FIELD_PREFIX + name].replace("\r\n", "\n")
        for name in version.kind.params
        if FIELD_PREFIX + name in request.POST
    }


def shown_values(version: TemplateVersion, typed: dict[str, str]) -> dict[str, str]:
    """What the test form shows again after a refusal: the typed values, each secret one left out."""
    secrets = masking.secret_names(version.kind)
    return {name: value for name, value in typed.items() if name not in secrets}


@require_POST
@staff_only(*send_to_self.MAY_TEST)
def send_test(request: HttpRequest, pk: int) -> HttpResponse:
    """Send version ``pk``, rendered with the typed values, to the staff member's own address, marked as a test.

    A refusal is the version's page with the reason, answered with the status
    ``TestRefused`` carries (400, 403, 429, 502).
    """
    version = get_object_or_404(TemplateVersion.objects.select_related("kind", "created_by", "approved_by"), pk=pk)
    typed = typed_params(request, version)
    try:
        sent = send_to_self.send_test_to_self(version, request.user, typed)
    except send_to_self.TestRefused as exc:
        extra = {"test_error": str(exc), "test_values": shown_values(version, typed)}
        return _page(request, _editor_context(request, _draft_of(version), version, **extra), status=exc.status)
    messages.success(
        request,
        f"Sent {version} to you ({sent.to}), marked {send_to_self.TEST_MARK.strip()}; it counts in no statistics.",
    )
    return redirect("frontend:template-version", pk=version.pk)
