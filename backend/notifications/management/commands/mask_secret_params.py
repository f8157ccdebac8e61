"""Mask what is already stored of secret params, for kinds that declare them (backend/notifications/masking.py).

Run it after marking a param secret on an existing kind, and once after upgrading to a version that
masks: rows written before hold the clear value in their preview, in the digests that folded them,
in provider errors that quoted the message, and in params after nothing will send them again. Safe
to run again and while workers run: a row that moved on meanwhile is left for the next run.
"""

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from backend.notifications import masking
from backend.notifications.actions.accept import digest_content
from backend.notifications.models import Attempt, DeadLetter, Kind, Notification, State

# States nothing renders again; a failed notification with an open dead letter may still be replayed.
_DONE = (State.SENT, State.DELIVERED, State.UNDELIVERED, State.EXPIRED, State.SUPPRESSED, State.FAILED)


def _errors(kind: Kind, notification: Notification) -> None:
    for model, field in ((Attempt, "error"), (DeadLetter, "last_error")):
        for pk, text in model.objects.filter(notification=notification).exclude(**{field: ""}).values_list("pk", field):
            masked = masking.redact(text, kind, notification.params)
            if masked != text:
                model.objects.filter(pk=pk, **{field: text}).update(**{field: masked})


def _params_done(notification: Notification) -> bool:
    if notification.state not in _DONE:
        return False
    return not notification.dead_letters.filter(replayed_at__isnull=True).exists()


def _mask(kind: Kind, notification: Notification) -> bool:
    """Mask one notification's stored preview, errors and (when done) params; True when the row changed."""
    fields = {}
    if notification.template_version is not None and notification.preview:
        fields["preview"] = masking.masked_preview(notification.template_version, kind, notification.params)
    fields["last_error"] = masking.redact(notification.last_error, kind, notification.params)
    if _params_done(notification):
        fields["params"] = masking.masked_params(kind, notification.params)
    fields = {name: value for name, value in fields.items() if value != getattr(notification, name)}
    with transaction.atomic():
        _errors(kind, notification)
        # Unchanged since it was read: a worker's write in between is not overwritten.
        return bool(
            fields
            and Notification.objects.filter(
                pk=notification.pk, state=notification.state, updated_at=notification.updated_at
            ).update(**fields)
        )


def _refold(digest_id) -> bool:
    """Rebuild a digest's items from the previews of the notifications it holds (now masked); True when changed."""
    with transaction.atomic():
        digest = Notification.objects.select_for_update().get(pk=digest_id)
        # A batch's rows share their created_at: ties go in key order, the order the batch inserts them in.
        held = Notification.objects.filter(digest=digest).order_by("created_at", "idempotency_key", "pk")
        previews = held.values_list("preview")
        content = digest_content([preview for (preview,) in previews])
        if (digest.params, digest.preview) == (content["params"], content["preview"]):
            return False
        return bool(Notification.objects.filter(pk=digest.pk).update(**content))


class Command(BaseCommand):
    help = "Mask stored previews, digests, provider errors and finished notifications' params of secret params."

    def add_arguments(self, parser):
        parser.add_argument(
            "--kind",
            action="append",
            dest="kinds",
            help="Only this kind (repeatable; default: every kind with secrets).",
        )

    def handle(self, kinds, **options):
        selected = Kind.objects.filter(name__in=kinds) if kinds else Kind.objects.all()
        selected = [kind for kind in selected if masking.secret_names(kind)]
        missing = sorted(set(kinds or []) - {kind.name for kind in selected})
        if missing:
            raise CommandError(f"No kind with a secret param named {', '.join(missing)}.")
        for kind in selected:
            changed, digests = 0, set()
            rows = Notification.objects.filter(kind=kind).select_related("template_version__kind")
            for notification in rows.iterator(chunk_size=500):
                changed += _mask(kind, notification)
                if notification.digest_id:
                    digests.add(notification.digest_id)
            refolded = sum(_refold(digest_id) for digest_id in digests)
            self.stdout.write(f"{kind.name}: {changed} notifications masked, {refolded} digests rebuilt")
