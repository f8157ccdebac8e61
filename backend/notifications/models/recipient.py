from django.db import models

# Languages written right to left; their email and previews carry dir="rtl".
RTL_LANGUAGES = frozenset({"ar", "fa", "he", "ur"})


def text_direction(language: str) -> str:
    """``"rtl"`` for Arabic, Persian, Hebrew and Urdu (and their regional variants), else ``"ltr"``."""
    return "rtl" if language.split("-")[0].lower() in RTL_LANGUAGES else "ltr"


class Recipient(models.Model):
    """A person's contact data, keyed by the calling company's own user id.

    ``phone`` is E.164 (``+9665…``), ``language`` a lowercase ISO 639-1 code,
    ``time_zone`` an IANA name (``Asia/Riyadh``). Validation lives in the API
    serializer, which normalises before anything is stored.
    """

    user_id = models.CharField(max_length=128, unique=True)
    email = models.EmailField(blank=True, db_index=True)
    phone = models.CharField(max_length=16, blank=True, db_index=True)
    language = models.CharField(max_length=8, default="en")
    time_zone = models.CharField(max_length=64, default="UTC")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user_id"]

    def __str__(self) -> str:
        return self.user_id

    @property
    def text_direction(self) -> str:
        """``"rtl"`` for Arabic, Persian, Hebrew and Urdu, else ``"ltr"``."""
        return text_direction(self.language)
