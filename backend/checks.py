"""System checks that refuse dangerous production configuration (``manage.py check --deploy``).

Ids are stable: notify.E001… errors, notify.W001… warnings.
"""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register


@register(Tags.security, deploy=True)
def check_production_settings(app_configs, **kwargs):
    problems = []
    if settings.SECRET_KEY == settings.EMBEDDED_SECRET_KEY:
        problems.append(
            Error("SECRET_KEY is the embedded demo key.", hint="Set SECRET_KEY or SECRET_KEY_FILE.", id="notify.E001")
        )
    if settings.HUEY_IMMEDIATE:
        problems.append(
            Error(
                "HUEY_IMMEDIATE is on: deliveries would run inside API requests.",
                hint="Unset HUEY_IMMEDIATE.",
                id="notify.E002",
            )
        )
    if not settings.REDIS_URL:
        problems.append(
            Warning(
                "REDIS_URL is unset: queues on SQLite, an in-memory channel layer and per-process counters.",
                hint="Set REDIS_URL; the embedded default is for one machine only.",
                id="notify.W001",
            )
        )
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        problems.append(
            Warning(
                "DATABASE_URL is unset: SQLite is the system of record.",
                hint="Point DATABASE_URL at PostgreSQL.",
                id="notify.W002",
            )
        )
    return problems


@register()
def check_providers_file(app_configs, **kwargs):
    """A providers file that cannot be read stops every process that runs checks (workers, migrate)."""
    from backend.notifications.providers.config import ProvidersFileError, providers_config

    try:
        providers_config()
    except ProvidersFileError as exc:
        return [Error(f"The providers file is unusable: {exc}", hint="See README, 'Providers file'.", id="notify.E003")]
    return []


@register()
def check_dkim(app_configs, **kwargs):
    """DKIM half configured, or with a key dkimpy cannot sign with, would send every mail unsigned or fail it."""
    from backend.notifications import email_dkim

    problem = email_dkim.configuration_problem(email_dkim.current())
    if problem:
        return [Error(problem, hint="See README, NOTIFY_DKIM_* in the configuration table.", id="notify.E004")]
    return []
