"""Where a staff member receives a test of a template: their own phone and inbox (their email is the user's)."""

import phonenumbers
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


def validate_e164(value: str) -> None:
    """A valid phone number written in E.164 (``+966501234567``); raises ``ValidationError``."""
    try:
        number = phonenumbers.parse(value, None)
    except phonenumbers.NumberParseException as exc:
        raise ValidationError(f"Not a phone number in E.164 (+ and digits): {exc}") from None
    if (
        not phonenumbers.is_valid_number(number)
        or phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164) != value
    ):
        raise ValidationError("Not a valid phone number in E.164, e.g. +966501234567.")


class StaffContact(models.Model):
    """A staff member's own phone and inbox, set by an administrator (never by the member).

    "Send a test to me" sends only here and to the user's ``email``: if staff
    could set these themselves, a test would reach any number they typed.
    ``inbox_user_id`` is the end-user id whose in-app inbox the member reads.
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_contact")
    phone = models.CharField(max_length=16, blank=True, validators=[validate_e164], help_text="E.164, for SMS tests.")
    inbox_user_id = models.CharField(
        max_length=128, blank=True, help_text="The end-user id whose in-app inbox this staff member reads."
    )

    def __str__(self) -> str:
        return f"contact of user {self.user_id}"
