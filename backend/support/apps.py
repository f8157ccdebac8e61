from django.apps import AppConfig


class SupportConfig(AppConfig):
    name = "backend.support"
    label = "support"
    verbose_name = "Support"
