"""Static files served by Django itself where no nginx serves them (``SERVE_STATIC``: the embedded demo)."""

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler, StaticFilesHandler
from django.core.exceptions import SuspiciousFileOperation
from django.http import Http404


class _NotFoundOutside:
    """Answers 404 for a path that leaves the static folders.

    Django's own handler lets the ``SuspiciousFileOperation`` of ``/static/%2e%2e/%2e%2e/etc/passwd`` escape as a 500.
    """

    def serve(self, request):
        try:
            return super().serve(request)
        except SuspiciousFileOperation as exc:
            raise Http404("No such static file.") from exc


class ASGIStaticFiles(_NotFoundOutside, ASGIStaticFilesHandler):
    """Django's ASGI static files handler, answering 404 outside the static folders."""


class WSGIStaticFiles(_NotFoundOutside, StaticFilesHandler):
    """Django's WSGI static files handler, answering 404 outside the static folders."""
