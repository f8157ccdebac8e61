"""The editor's form: which template (kind × language × channel), its three parts, and the pricing inputs."""

import phonenumbers
from django import forms
from django.conf import settings
from django.core.validators import RegexValidator
from django.utils.translation import get_language_info

from backend.notifications import locales, pricing
from backend.notifications.models import Channel, Kind, TemplateVersion
from backend.notifications.rendering import message_text_problem
from frontend.editor.preview import Draft

DEFAULT_AUDIENCE = 1000
MAX_AUDIENCE = 100_000_000
# Where a language's SMS most likely go, to price a template without asking first; else the first country listed.
_LIKELY_COUNTRY = {"ar": "SA", "fa": "IR", "de": "DE", "en": "US", "hi": "IN"}
# A channel's parts: an SMS is text only, push and in-app have a title, email all three.
CHANNEL_PARTS = {
    Channel.SMS: ("text_body",),
    Channel.PUSH: ("subject", "text_body"),
    Channel.INAPP: ("subject", "text_body"),
    Channel.EMAIL: ("subject", "text_body", "html_body"),
}


def language_choices() -> list[tuple[str, str]]:
    """The site's languages, the right-to-left ones, and every language a template exists in."""
    used = TemplateVersion.objects.order_by("language").values_list("language", flat=True).distinct()
    codes = dict.fromkeys([*(code for code, _ in settings.LANGUAGES), *locales.rtl_languages(), *used])
    return [(code, language_name(code)) for code in codes]


def language_name(code: str) -> str:
    """``"Pashto, پښتو (ps)"``: its English name for these English pages, its own beside it when it differs.

    Django's English name for the languages it knows, else CLDR's (``ary`` is "Moroccan Arabic", which
    has no name of its own in CLDR: it read "ary (ary)").
    """
    try:
        english = get_language_info(code)["name"]
    except KeyError:  # a language CLDR knows and Django does not (ps, dv)
        english = locales.english_name(code)
    native = locales.native_name(code)
    return f"{english} ({code})" if native in (english, code) else f"{english}, {native} ({code})"


def country_choices() -> list[tuple[str, str]]:
    """Every country of the SMS price list, with its calling code."""
    countries = sorted({country for _, country in pricing.price_list().prices})
    return [(c, f"{c} (+{phonenumbers.country_code_for_region(c)})") for c in countries]


def default_country(language: str) -> str:
    countries = [code for code, _ in country_choices()]
    likely = _LIKELY_COUNTRY.get(language.split("-")[0])
    return likely if likely in countries else next(iter(countries), "")


class _Text(forms.CharField):
    """Text kept as typed (whitespace is part of an SMS), with browsers' CRLF line ends made LF."""

    def __init__(self, **kwargs):
        super().__init__(strip=False, required=False, **kwargs)

    def to_python(self, value):
        text = super().to_python(value).replace("\r\n", "\n").replace("\r", "\n")
        problem = message_text_problem(text)
        if problem:
            raise forms.ValidationError(problem)
        return text


class EditorForm(forms.Form):
    kind = forms.ModelChoiceField(Kind.objects.all(), to_field_name="name")
    language = forms.CharField(
        max_length=8,
        validators=[RegexValidator(r"^[a-z]{2,3}(-[a-z0-9]{2,4})?$", "A language code such as en, ar or pt-br.")],
    )
    channel = forms.ChoiceField(choices=Channel.choices)
    subject = _Text(max_length=255)  # TemplateVersion.subject
    # Bounds on what one keystroke makes the server render and count; an SMS of 20,000 characters is ~130 parts.
    text_body = _Text(max_length=20_000)
    html_body = _Text(max_length=100_000)
    country = forms.ChoiceField(required=False)
    audience = forms.IntegerField(min_value=1, max_value=MAX_AUDIENCE, required=False)

    def __init__(self, *args, for_save: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.for_save = for_save
        self.fields["country"].choices = [("", ""), *country_choices()]

    def clean_language(self) -> str:
        return self.cleaned_data["language"].lower()

    def clean(self):
        data = super().clean()
        channel = data.get("channel")
        if channel:
            # Parts the channel does not use are not stored, whatever a stale form sent.
            for part in ("subject", "html_body"):
                if part not in CHANNEL_PARTS[channel]:
                    data[part] = ""
        if self.for_save and not data.get("text_body", "").strip():
            self.add_error("text_body", "Write the text: it is the SMS or push text and the email's plain-text part.")
        return data

    def draft(self) -> Draft:
        data = self.cleaned_data
        return Draft(
            data["kind"], data["language"], data["channel"], data["subject"], data["text_body"], data["html_body"]
        )
