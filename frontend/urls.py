from django.urls import path

from frontend import preferences, unsubscribe, views
from frontend.campaigns import composer
from frontend.campaigns import progress as campaign_page
from frontend.campaigns import report as campaign_report
from frontend.campaigns import views as segments
from frontend.editor import review as editor_review
from frontend.editor import self_send
from frontend.editor import views as editor

app_name = "frontend"

urlpatterns = [
    path("", views.home, name="home"),
    # End users, by signed link (backend/notifications/links.py): the preference center and unsubscribe.
    path("preferences/<str:token>", preferences.page, name="preferences"),
    path("preferences/<str:token>/channel", preferences.channel, name="preferences-channel"),
    path("preferences/<str:token>/marketing", preferences.marketing, name="preferences-marketing"),
    path("preferences/<str:token>/quiet-hours", preferences.quiet_hours, name="preferences-quiet-hours"),
    path("preferences/<str:token>/time-zone", preferences.time_zone, name="preferences-time-zone"),
    path("preferences/<str:token>/language", preferences.language, name="preferences-language"),
    path("unsubscribe/<str:token>", unsubscribe.unsubscribe, name="unsubscribe"),
    path("unsubscribe/<str:token>/confirm", unsubscribe.confirm, name="unsubscribe-confirm"),
    path("unsubscribe/<str:token>/undo", unsubscribe.undo, name="unsubscribe-undo"),
    # Staff: the template editor (frontend/editor/), login through the admin.
    path("templates/", editor.template_list, name="templates"),
    path("templates/edit/", editor.template_editor, name="template-editor"),
    path("templates/<int:pk>/", editor.version_editor, name="template-version"),
    path("templates/preview/", editor.template_preview, name="template-preview"),
    path("templates/save/", editor.template_save, name="template-save"),
    path("templates/<int:pk>/approve/", editor.template_approve, name="template-approve"),
    # Staff: the approval workflow (frontend/editor/review.py) and "send a test to me" (frontend/editor/self_send.py).
    path("templates/awaiting/", editor_review.awaiting, name="templates-awaiting"),
    path("templates/<int:pk>/review/", editor_review.review, name="template-review"),
    path("templates/<int:pk>/review/decide/", editor_review.decide, name="template-decide"),
    path("templates/<int:pk>/test/", self_send.send_test, name="template-send-test"),
    # Staff: segments (frontend/campaigns/). The upload path has its own body limit (backend/asgi.py, nginx).
    path("campaigns/segments/", segments.segment_list, name="segments"),
    path("campaigns/segments/<int:pk>/size", segments.segment_size, name="segment-size"),
    path("campaigns/segments/new", segments.filter_new, name="segment-filter-new"),
    path("campaigns/segments/preview", segments.filter_preview, name="segment-filter-preview"),
    path("campaigns/segments/save", segments.filter_save, name="segment-filter-save"),
    path("campaigns/segments/upload/new", segments.upload_new, name="segment-upload-form"),
    path("campaigns/segments/upload", segments.upload, name="segment-upload"),
    path("campaigns/segments/upload/<str:token>/unknown.csv", segments.upload_unknown, name="segment-upload-unknown"),
    path("campaigns/segments/upload/save", segments.upload_save, name="segment-upload-save"),
    # Staff: a campaign's PDF report (frontend/campaigns/report.py).
    path("campaigns/<int:pk>/report.pdf", campaign_report.campaign_report, name="campaign-report"),
    # Staff: campaigns (frontend/campaigns/composer.py); /campaigns/<id>/ is the running campaign's page.
    path("campaigns/", composer.campaign_list, name="campaigns"),
    path("campaigns/new", composer.compose_new, name="campaign-new"),
    path("campaigns/preflight", composer.compose_preflight, name="campaign-preflight"),
    path("campaigns/<int:pk>/edit", composer.compose_edit, name="campaign-edit"),
    path("campaigns/<int:pk>/review", composer.review, name="campaign-review"),
    # Staff: a campaign's page, its progress, cancel, ledger, remainder and correction (frontend/campaigns/progress.py).
    path("campaigns/<int:pk>/", campaign_page.detail, name="campaign"),
    path("campaigns/<int:pk>/progress", campaign_page.progress, name="campaign-progress"),
    path("campaigns/<int:pk>/cancel", campaign_page.cancel, name="campaign-cancel"),
    path("campaigns/<int:pk>/pause", campaign_page.pause, name="campaign-pause"),
    path("campaigns/<int:pk>/resume", campaign_page.resume, name="campaign-resume"),
    path("campaigns/<int:pk>/ledger.csv", campaign_page.ledger_csv, name="campaign-ledger-csv"),
    path("campaigns/<int:pk>/resend", campaign_page.resend, name="campaign-resend"),
    path("campaigns/<int:pk>/correct", campaign_page.correct, name="campaign-correct"),
]
