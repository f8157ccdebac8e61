from django.apps import AppConfig


class InboxConfig(AppConfig):
    name = "inbox"
    verbose_name = "In-app inbox"

    def ready(self) -> None:
        from inbox import provider  # noqa: F401  (registers the inapp provider)
