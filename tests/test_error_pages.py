"""403, 404, 405 and 500 pages in the visitor's language and direction; JSON under /api/; /favicon.ico; 403 logs."""

import logging

import pytest
from django.test import Client
from django.urls import include, path

from backend.notifications.models import TemplateVersion

pytestmark = pytest.mark.usefixtures("demo_data")


def boom(request):
    raise RuntimeError("a bug")


# This module doubles as a URLconf for the 500 test (pytest.mark.urls): a view that fails, and the real handler.
urlpatterns = [path("boom", boom), path("api/boom", boom), path("", include("frontend.urls"))]
handler500 = "frontend.error_pages.server_error"


def test_a_support_agent_opening_the_editor_gets_the_403_page_in_arabic(client, outsider):
    client.force_login(outsider)
    response = client.get("/templates/edit/", HTTP_ACCEPT_LANGUAGE="ar")
    assert response.status_code == 403
    assert response["Content-Language"] == "ar"
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "<h1>ليس لديك إذن بفتح هذه الصفحة</h1>" in html
    assert "خطأ 403" in html
    assert 'href="/">الانتقال إلى الصفحة الرئيسية</a>' in html


def test_the_403_page_is_english_for_an_english_browser(client, outsider):
    client.force_login(outsider)
    html = client.get("/templates/edit/", HTTP_ACCEPT_LANGUAGE="en-GB,en;q=0.8").content.decode()
    assert '<html lang="en" dir="ltr">' in html
    assert "<h1>You don&#x27;t have access to this page</h1>" in html
    assert "ask an administrator to give you access." in html


def test_a_403_is_one_log_line_without_a_traceback(client, outsider, caplog):
    client.force_login(outsider)
    with caplog.at_level(logging.WARNING, logger="django.request"):
        client.get("/templates/edit/")
    [record] = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == "Forbidden (Permission denied): /templates/edit/ (user support)"
    assert record.exc_info is None
    assert "\n" not in logging.Formatter().format(record)


def test_an_unknown_page_is_a_404_page_in_persian(client):
    response = client.get("/no-such-page", HTTP_ACCEPT_LANGUAGE="fa")
    assert response.status_code == 404
    html = response.content.decode()
    assert '<html lang="fa" dir="rtl">' in html
    assert "در این نشانی صفحه‌ای وجود ندارد." in html
    assert 'href="/"' in html


def test_a_404_on_a_persons_page_points_back_to_their_message_not_to_the_staff_pages(client):
    html = client.get("/inbox/not-a-link/messages", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "Open the link again from the message you received." in html
    assert 'href="/"' not in html


def test_api_paths_keep_their_json_404(client):
    response = client.get("/api/v1/nothing-here", HTTP_ACCEPT_LANGUAGE="ar")
    assert response.status_code == 404
    assert response.json() == {"error": "not_found", "message": "No such resource: /api/v1/nothing-here"}


def test_an_approve_url_opened_directly_is_a_405_page_that_says_to_use_the_button(client, approver):
    draft = TemplateVersion.objects.filter(status=TemplateVersion.Status.APPROVED).first()
    client.force_login(approver)
    response = client.get(f"/templates/{draft.pk}/approve/", HTTP_ACCEPT_LANGUAGE="en")
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    html = response.content.decode()
    assert "<h1>This page can&#x27;t be opened this way</h1>" in html
    assert "Go back and use the button." in html


def test_a_405_in_arabic(client, approver):
    client.force_login(approver)
    html = client.get("/templates/save/", HTTP_ACCEPT_LANGUAGE="ar").content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "لا يمكن فتح هذه الصفحة بهذه الطريقة" in html


@pytest.mark.urls("tests.test_error_pages")
def test_a_server_error_is_a_500_page_in_the_visitors_language():
    client = Client(raise_request_exception=False)
    response = client.get("/boom", HTTP_ACCEPT_LANGUAGE="ar")
    assert response.status_code == 500
    html = response.content.decode()
    assert '<html lang="ar" dir="rtl">' in html
    assert "حدث خطأ من جهتنا" in html


@pytest.mark.urls("tests.test_error_pages")
def test_a_server_error_under_the_api_stays_json():
    response = Client(raise_request_exception=False).get("/api/boom")
    assert response.status_code == 500
    assert response.json()["error"] == "server_error"


def test_the_favicon_is_an_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/x-icon"
    assert response.content[:4] == b"\x00\x00\x01\x00"  # ICO header: reserved 0, type 1 (icon)
    assert "max-age=86400" in response["Cache-Control"]
