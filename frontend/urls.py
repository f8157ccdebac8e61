from django.urls import path

from frontend import preferences, unsubscribe, views

app_name = "frontend"

urlpatterns = [
    path("", views.home, name="home"),
    # End users, by signed link (backend/notifications/links.py): the preference center and unsubscribe.
    path("preferences/<str:token>", preferences.page, name="preferences"),
    path("preferences/<str:token>/channel", preferences.channel, name="preferences-channel"),
    path("preferences/<str:token>/quiet-hours", preferences.quiet_hours, name="preferences-quiet-hours"),
    path("preferences/<str:token>/time-zone", preferences.time_zone, name="preferences-time-zone"),
    path("preferences/<str:token>/language", preferences.language, name="preferences-language"),
    path("unsubscribe/<str:token>", unsubscribe.unsubscribe, name="unsubscribe"),
    path("unsubscribe/<str:token>/confirm", unsubscribe.confirm, name="unsubscribe-confirm"),
    path("unsubscribe/<str:token>/undo", unsubscribe.undo, name="unsubscribe-undo"),
]
