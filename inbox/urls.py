"""The end user's inbox page (HTMX) and the widget's demo embed, reached by a signed link."""

from django.urls import path

from inbox import views

app_name = "inbox"

urlpatterns = [
    path("<str:link>/", views.page, name="page"),
    path("<str:link>/messages", views.messages, name="messages"),
    path("<str:link>/messages/<int:message_id>/read", views.read, name="read"),
    path("<str:link>/messages/<int:message_id>/archive", views.archive, name="archive"),
    path("<str:link>/read-all", views.read_all, name="read_all"),
    path("<str:link>/token", views.token, name="token"),
    path("<str:link>/embed", views.embed, name="embed"),
]
