from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "backend.notifications"
    label = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from backend import checks  # noqa: F401  (registers the system checks)
        from backend.notifications.providers import fake, fcm, smtp, twilio, vonage, webpush  # noqa: F401
