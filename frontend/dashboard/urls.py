from django.urls import path

from frontend.dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.page, name="page"),
    path("data", views.data, name="data"),
]
