"""HTML to PDF with WeasyPrint, allowed to load the named font files and nothing else.

Imported only when a report is made (``campaigns/report.py``): importing WeasyPrint takes
about 1.5 s here (it parses its default stylesheets), which no other process should pay.
"""

from collections.abc import Collection

from weasyprint import HTML
from weasyprint.urls import URLFetcher, URLFetcherResponse


class FetchRefused(ValueError):
    """The HTML named a resource other than its fonts: a campaign's text must never make the server fetch a URL."""


class FontsOnly(URLFetcher):
    """WeasyPrint's fetcher limited to ``file://`` URLs of ``fonts`` (absolute paths)."""

    def __init__(self, fonts: Collection[str]):
        super().__init__(allowed_protocols=["file"])
        self.fonts = frozenset(fonts)

    def fetch(self, url: str, headers: dict | None = None) -> URLFetcherResponse:
        if url.removeprefix("file://") not in self.fonts:
            raise FetchRefused(f"The report loads only its fonts, not {url}.")
        return super().fetch(url, headers)


def write_pdf(html: str, fonts: Collection[str]) -> bytes:
    """``html`` laid out as PDF bytes, the ``fonts`` it names by ``file://`` URL embedded (subsets)."""
    return HTML(string=html, url_fetcher=FontsOnly(fonts)).write_pdf()
