"""What the template editor shows beside the text, computed on the server only.

One source of truth: the message is rendered by ``rendering.render`` (the
sandbox the workers use, here in the preview worker process with a wall-clock
limit: ``worker.py``), measured by ``sms_encoding.analyze`` and priced by
``pricing``; the page lays out what they return and no JavaScript counts.

Worst case. A kind declares each param with an example and a ``max_length``
(``Kind.params``). The worst case fills every param to its ``max_length`` with
the character that costs the most *without changing the template's encoding*:

* a GSM-7 template gets ``€``: an extension-table character costs two septets
  (TS 23.038 §6.2.1.1), the most any GSM-7 character costs, and it keeps the
  message GSM-7. ``X`` would cost one septet and understate the price by up to
  half of every param; a character outside GSM-7 would flip the encoding, which
  is a different question (next point);
* a UCS-2 template gets ``😀`` (U+1F600): beyond the Basic Multilingual Plane it
  is a surrogate pair, two UTF-16 code units, where an Arabic letter costs one.

Filling is monotone: for a fixed encoding a costlier character never needs
fewer segments (parts are filled in order and a two-unit character moves whole
to the next part), so these fillers give the most segments a param of that
length can cost. A GSM-7 template whose params may carry any character (a
name with an emoji or in Arabic) would go out as UCS-2: the editor shows that
third figure separately ("if a param forces UCS-2"), so that the worst case
stays about the params' length, which the kind bounds, and the encoding flip
about their alphabet, which it does not.

``max_length`` counts characters (code points), as ``len()`` does. A param
without ``max_length`` keeps its example in the worst case and is named as
unbounded; a list param (``items`` of a digest) becomes one item of
``max_length`` characters.
"""

import unicodedata
from dataclasses import dataclass
from decimal import Decimal

from backend.notifications import pricing, rendering
from backend.notifications.locales import text_direction
from backend.notifications.models import Channel, Kind, TemplateVersion
from backend.notifications.sms_encoding import (
    GSM7,
    UCS2,
    SmsAnalysis,
    analyze,
    encoding_and_segments,
    replace_lookalikes,
)
from frontend.editor import worker

GSM7_FILLER = "€"  # extension table: 2 septets, the most a GSM-7 character costs
UCS2_FILLER = "\U0001f600"  # 😀, a surrogate pair: 2 UTF-16 code units, the most a UCS-2 character costs

# Unicode categories drawn as their code point in the highlighted text: spaces,
# invisible format characters and controls would otherwise be an empty mark.
_INVISIBLE = frozenset({"Zs", "Zl", "Zp", "Cf", "Cc", "Mn"})


@dataclass(frozen=True)
class Draft:
    """The fields of the editor form: what would be saved as the next version."""

    kind: Kind
    language: str
    channel: str
    subject: str = ""
    text_body: str = ""
    html_body: str = ""

    @property
    def direction(self) -> str:
        return text_direction(self.language)

    def as_version(self) -> TemplateVersion:
        """An unsaved version, the shape ``rendering.render`` takes."""
        return TemplateVersion(
            kind=self.kind,
            language=self.language,
            channel=self.channel,
            subject=self.subject,
            text_body=self.text_body,
            html_body=self.html_body,
        )


def worst_params(kind: Kind, filler: str) -> dict:
    """Each declared param filled to its ``max_length`` with ``filler`` (see the module docstring)."""
    params = {}
    for name, spec in kind.params.items():
        example = spec.get("example", name)
        max_length = spec.get("max_length")
        if not max_length:
            params[name] = example
        else:
            params[name] = [filler * max_length] if isinstance(example, list) else filler * max_length
    return params


@dataclass(frozen=True)
class SmsMeasure:
    """One SMS of a version: its encoding and segments with some params, and at worst (each param at its longest)."""

    encoding: str
    segments: int
    worst: int


def measure_sms(version: TemplateVersion, params: dict) -> SmsMeasure:
    """``version``'s SMS with ``params``, and with every declared param at its ``max_length`` (``worst_params``).

    The filler follows the text's encoding with ``params``: a GSM-7 text is measured with the costliest
    GSM-7 character, a UCS-2 one with an emoji. Rendered in the preview worker, as the editor's panel is:
    a draft under review is an author's text, and the approver's page must not wait on it for longer than
    ``NOTIFY["PREVIEW_TIMEOUT"]``. Raises ``rendering.RenderError`` when it does not render, or not in time.
    """
    sets = [params] + [{**params, **worst_params(version.kind, filler)} for filler in (GSM7_FILLER, UCS2_FILLER)]
    rendered, *worst = _render_all(version, sets)
    encoding, segments = encoding_and_segments(_ok(rendered).text)
    at_worst = _ok(worst[1] if encoding == UCS2 else worst[0]).text
    return SmsMeasure(encoding, segments, max(segments, encoding_and_segments(at_worst)[1]))


def unbounded_params(kind: Kind) -> list[str]:
    """Declared params without a ``max_length``: the worst case cannot bound them."""
    return [name for name, spec in kind.params.items() if not spec.get("max_length")]


def money(amount: Decimal) -> str:
    """An exact amount with thousands separators: ``90,000.0000``, never rounded."""
    return format(amount, ",f")


@dataclass(frozen=True)
class PriceRow:
    """What one provider charges for the country: one message and the whole audience."""

    provider: str
    primary: bool
    per_message: str
    audience: str
    currency: str


@dataclass(frozen=True)
class SmsCase:
    """One way the SMS can go out: its text, how it travels, and what it costs per provider."""

    text: str
    analysis: SmsAnalysis
    prices: tuple[PriceRow, ...]

    @property
    def used_in_segment(self) -> int:
        """Units taken in the current (last) segment."""
        return self.analysis.segment_capacity - self.analysis.units_left

    @property
    def price(self) -> PriceRow | None:
        """The primary provider's price, the one the platform would use; None when it has none for the country."""
        return next((row for row in self.prices if row.primary), None)


def _prices(segments: int, country: str, audience: int) -> tuple[PriceRow, ...]:
    """Every provider with a price for ``country``, the one SMS are sent by (primary) first."""
    prices = pricing.price_list()
    providers = prices.preferred_providers(country) or [None]  # None: let pricing name the problem
    quotes = [pricing.price_audience(segments, audience, country, provider) for provider in providers]
    primary = prices.default_provider(country)
    return tuple(
        PriceRow(q.provider, q.provider == primary, money(q.per_message), money(q.amount), q.currency) for q in quotes
    )


def _sms_case(text: str, country: str, audience: int) -> SmsCase:
    analysis = analyze(text)
    return SmsCase(text, analysis, _prices(analysis.segments, country, audience))


@dataclass(frozen=True)
class Run:
    """A stretch of the author's text in the highlighted copy.

    ``kind`` is ``"text"`` (GSM-7), ``"fix"`` (one character that forces UCS-2
    and has a GSM-7 look-alike; ``index`` is where it is) or ``"nofix"`` (forces
    UCS-2, no look-alike: Arabic letters, emoji; neighbours are merged).
    ``ucs2_anyway``: the text has ``"nofix"`` characters too, so this fix alone leaves it UCS-2.
    """

    kind: str
    text: str
    index: int = -1
    replacement: str = ""
    ucs2_anyway: bool = False

    @property
    def label(self) -> str:
        """What the mark shows: the character, or its code point when it is invisible."""
        if self.kind == "fix" and unicodedata.category(self.text) in _INVISIBLE:
            return f"U+{ord(self.text):04X}"
        return self.text

    @property
    def fix_value(self) -> str:
        """The fix button's value, ``index:code point``: a stale click (the text moved on) does nothing."""
        return f"{self.index}:{ord(self.text):X}"

    @property
    def title(self) -> str:
        if self.kind == "nofix":
            return "No GSM-7 look-alike: this keeps the message UCS-2"
        name = unicodedata.name(self.text, "character").lower()
        with_what = f"'{self.replacement}'" if self.replacement else "nothing (it is invisible)"
        if self.ucs2_anyway:
            # A Persian text with an em dash: the letters need UCS-2 whatever the dash is.
            return (
                f"{name} (U+{ord(self.text):04X}): replace it with {with_what}; the message stays UCS-2 "
                "for the characters without a look-alike, so this alone saves nothing"
            )
        return f"{name} (U+{ord(self.text):04X}) forces UCS-2: replace it with {with_what}"


@dataclass(frozen=True)
class Fixable:
    """A character with a look-alike, and how often it occurs."""

    char: str
    replacement: str
    count: int
    label: str
    name: str


def source_runs(text: str) -> tuple[Run, ...]:
    """``text`` cut into runs around each character that forces UCS-2 (``analyze`` finds them)."""
    runs: list[Run] = []
    start = 0
    ucs2 = analyze(text).ucs2_characters
    anyway = any(replacement is None for _, _, replacement in ucs2)
    for char, index, replacement in ucs2:
        if index > start:
            runs.append(Run("text", text[start:index]))
        start = index + 1
        if replacement is not None:
            runs.append(Run("fix", char, index, replacement, ucs2_anyway=anyway))
        elif runs and runs[-1].kind == "nofix" and runs[-1].index + len(runs[-1].text) == index:
            runs[-1] = Run("nofix", runs[-1].text + char, runs[-1].index)
        else:
            runs.append(Run("nofix", char, index))
    if start < len(text):
        runs.append(Run("text", text[start:]))
    return tuple(runs)


def fixables(runs: tuple[Run, ...]) -> tuple[Fixable, ...]:
    """The distinct characters that have a look-alike, in order of first appearance."""
    counts: dict[str, int] = {}
    replacements: dict[str, Run] = {}
    for run in runs:
        if run.kind == "fix":
            counts[run.text] = counts.get(run.text, 0) + 1
            replacements.setdefault(run.text, run)
    return tuple(
        Fixable(char, run.replacement, counts[char], run.label, unicodedata.name(char, "").lower())
        for char, run in replacements.items()
    )


def apply_fix(text: str, fix: str) -> str:
    """``text`` with one look-alike fix applied: ``"all"``, or ``"index:hex code point"`` from a button.

    The character must still be at that index (a click on a mark of an older
    copy of the text changes nothing); ``analyze`` picks the replacement from
    the whole text (a ZWNJ goes only from an otherwise GSM-7 text), so the page
    never decides one itself.
    """
    if fix == "all":
        return replace_lookalikes(text)
    index, _, code = fix.partition(":")
    try:
        position, char = int(index), chr(int(code, 16))
    except (ValueError, OverflowError):
        return text
    if not 0 <= position < len(text) or text[position] != char:
        return text
    found = next((c for c in analyze(text).ucs2_characters if c.index == position), None)
    if found is None or found.replacement is None:
        return text
    return text[:position] + found.replacement + text[position + 1 :]


@dataclass(frozen=True)
class Preview:
    """Everything the panel shows for a draft.

    ``rendered`` is the message with the example params (None when it does not
    render; ``error`` says why). For SMS: ``example``, ``worst`` and ``flipped``
    (a GSM-7 template whose params bring a UCS-2 character; None otherwise) with
    their prices; ``runs`` and ``fixes`` mark the characters of the author's
    text that force UCS-2. ``cleaned_html`` is the HTML body as saving will
    store it, when the sanitizer changes it.
    """

    draft: Draft
    country: str
    audience: int
    rendered: rendering.Rendered | None = None
    error: str = ""
    missing: tuple[str, ...] = ()
    example: SmsCase | None = None
    worst: SmsCase | None = None
    flipped: SmsCase | None = None
    worst_error: str = ""
    pricing_error: str = ""
    runs: tuple[Run, ...] = ()
    fixes: tuple[Fixable, ...] = ()
    from_params: tuple[str, ...] = ()
    unbounded: tuple[str, ...] = ()
    cleaned_html: str = ""

    @property
    def direction(self) -> str:
        return self.draft.direction

    @property
    def worst_filler(self) -> str:
        return UCS2_FILLER if self.example and self.example.analysis.encoding == UCS2 else GSM7_FILLER

    @property
    def fixable_count(self) -> int:
        return sum(fix.count for fix in self.fixes)

    @property
    def unfixable_count(self) -> int:
        return sum(len(run.text) for run in self.runs if run.kind == "nofix")

    @property
    def cases(self) -> list[tuple[str, str, SmsCase]]:
        """(id, heading, case) of each SMS figure there is, for the comparison table."""
        named = [
            ("example", "Example params", self.example),
            ("worst", "Worst case", self.worst),
            ("flipped", "A param forces UCS-2", self.flipped),
        ]
        return [(key, heading, case) for key, heading, case in named if case is not None]

    @property
    def provider_rows(self) -> list[tuple[str, bool, list[tuple[str, PriceRow | None]]]]:
        """(provider, primary, [(case id, its price row)]) — the comparison table's price rows."""
        cases = self.cases
        rows = []
        for index, provider in enumerate(row.provider for row in (self.example.prices if self.example else ())):
            prices = [(key, next((r for r in case.prices if r.provider == provider), None)) for key, _, case in cases]
            rows.append((provider, index == 0, prices))
        return rows

    @property
    def audience_label(self) -> str:
        return f"{self.audience:,}"


RenderResult = rendering.Rendered | rendering.RenderError


def _render_all(draft: Draft | TemplateVersion, param_sets: list[dict]) -> list[RenderResult]:
    """The draft (or a saved version) rendered with each param set in one trip to the preview worker (bounded in
    time and memory).

    A render that fails is its ``RenderError`` in the list; a worker timeout fails them all.
    """
    fields = (draft.language, draft.channel, draft.subject, draft.text_body, draft.html_body)
    try:
        return worker.run(render_fields, *fields, param_sets)
    except worker.PreviewTimeout as exc:
        return [rendering.RenderError(f"template error: {exc}")] * len(param_sets)


def render_fields(
    language: str, channel: str, subject: str, text_body: str, html_body: str, param_sets: list[dict]
) -> list:
    """``rendering.render`` of an unsaved version with these parts, once per param set (what the worker runs).

    Plain data in and out: a ``Rendered`` or the ``RenderError`` for each param set, in order. The
    channel decides the isolation of inserted values (none in SMS), so the preview shows what is sent.
    """
    version = TemplateVersion(
        language=language, channel=channel, subject=subject, text_body=text_body, html_body=html_body
    )
    results: list[RenderResult] = []
    for params in param_sets:
        try:
            results.append(rendering.render(version, params))
        except rendering.RenderError as exc:
            results.append(exc)
    return results


def _ok(result: RenderResult) -> rendering.Rendered:
    if isinstance(result, rendering.RenderError):
        raise result
    return result


def _sms_fields(
    draft: Draft, rendered: rendering.Rendered, worst: dict[str, RenderResult], country: str, audience: int
) -> dict:
    """The SMS figures: example, worst case (``worst``: rendered with each filler) and the encoding flip, priced."""
    fields: dict = {"runs": source_runs(draft.text_body), "unbounded": tuple(unbounded_params(draft.kind))}
    fields["fixes"] = fixables(fields["runs"])
    try:
        example = fields["example"] = _sms_case(rendered.text, country, audience)
        if example.analysis.encoding == UCS2 and not any(run.kind != "text" for run in fields["runs"]):
            fields["from_params"] = tuple(dict.fromkeys(c.char for c in example.analysis.ucs2_characters))
        filler = UCS2_FILLER if example.analysis.encoding == UCS2 else GSM7_FILLER
        try:
            fields["worst"] = _sms_case(_ok(worst[filler]).text, country, audience)
            if example.analysis.encoding == GSM7:
                flipped = _sms_case(_ok(worst[UCS2_FILLER]).text, country, audience)
                fields["flipped"] = flipped if flipped.analysis.encoding == UCS2 else None
        except rendering.RenderError as exc:
            fields["worst_error"] = str(exc)
    except (pricing.PricingError, pricing.PriceListError) as exc:
        fields["pricing_error"] = str(exc)
    return fields


def build(draft: Draft, country: str, audience: int) -> Preview:
    """Render ``draft`` with the kind's example params and, for SMS, measure and price it."""
    fields: dict = {}
    if draft.channel == Channel.EMAIL and draft.html_body:
        cleaned = rendering.sanitize_html(draft.html_body)
        fields["cleaned_html"] = cleaned if cleaned != draft.html_body else ""
    fillers = (GSM7_FILLER, UCS2_FILLER) if draft.channel == Channel.SMS else ()
    # Every render the panel may need, in one trip to the worker: which worst case applies is known
    # only once the example is measured, and a render costs less than a trip.
    sets = [rendering.example_params(draft.kind)] + [worst_params(draft.kind, filler) for filler in fillers]
    rendered, *worst = _render_all(draft, sets)
    if isinstance(rendered, rendering.RenderError):
        runs = source_runs(draft.text_body) if draft.channel == Channel.SMS else ()
        return Preview(draft, country, audience, error=str(rendered), missing=tuple(rendered.missing), runs=runs,
                       fixes=fixables(runs), **fields)  # fmt: skip
    if draft.channel == Channel.SMS:
        fields.update(_sms_fields(draft, rendered, dict(zip(fillers, worst, strict=True)), country, audience))
    return Preview(draft, country, audience, rendered=rendered, **fields)
