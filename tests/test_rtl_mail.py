"""Right-to-left done to the standard: direction from CLDR, isolated params, the visible unsubscribe footer.

Issue 13: direction for every RTL language (not a list of four), every inserted value isolated in
RTL mail (``<bdi>`` in HTML, U+2068…U+2069 in the text part, nothing in SMS), and the platform's
footer with both links in marketing mail and digests that hold marketing items.
"""

import base64
import re
import zlib
from contextlib import suppress
from html.parser import HTMLParser

import pytest
from django.core import signing
from django.test import Client

from backend.notifications import links, locales, rendering
from backend.notifications.actions.accept import digest_content
from backend.notifications.delivery import dispatch
from backend.notifications.models import Kind, Notification, Recipient, TemplateVersion, UnsubscribeToken

FSI, PDI = "\u2068", "\u2069"
RTL = ["ar", "arc", "ckb", "dv", "fa", "he", "ps", "sd", "ug", "ur", "yi"]
LTR = ["en", "fr", "tr", "hi"]
DIRECTIONS = [(code, "rtl") for code in RTL] + [(code, "ltr") for code in LTR]
SUPPORT = {"order": "#A-1042", "email": "help@example.com", "phone": "+1 202 555 0143"}


@pytest.mark.parametrize(("language", "direction"), DIRECTIONS)
def test_the_direction_comes_from_cldr(language, direction):
    assert locales.text_direction(language) == direction


@pytest.mark.parametrize(("language", "direction"), [("ar-EG", "rtl"), ("ps_AF", "rtl"), ("sd-Deva", "ltr"),
                                                     ("pt-BR", "ltr"), ("xx", "ltr"), ("", "ltr")])  # fmt: skip
def test_regions_scripts_and_unknown_codes(language, direction):
    assert locales.text_direction(language) == direction


@pytest.mark.parametrize("language", RTL + LTR)
def test_every_one_of_them_is_a_language_users_may_choose(language):
    assert locales.is_language(language)


@pytest.mark.django_db
@pytest.mark.parametrize(("language", "direction"), DIRECTIONS)
def test_the_same_through_the_api(api, send, demo_data, language, direction):
    user = f"u-{language}"
    body = {"email": f"{language}@example.com", "language": language, "time_zone": "UTC"}
    assert api.put(f"/api/v1/users/{user}", body, format="json").status_code == 201
    shipped = Kind.objects.get(name="shipped")
    parts = {"subject": "{{ order }}", "text_body": "{{ order }}", "html_body": "<p>{{ order }}</p>"}
    TemplateVersion.objects.create(kind=shipped, language=language, channel="email", version=99, status="approved",
                                   **parts)  # fmt: skip
    response = send({"user_id": user, "kind": "shipped", "channel": "email", "params": {"order": "5012"}}, key=user)
    assert response.status_code == 202, response.json()
    message = dispatch.build_message(Notification.objects.get(pk=response.json()["id"]))
    assert message.html.startswith(f'<!DOCTYPE html>\n<html lang="{language}" dir="{direction}">')
    assert f'<body dir="{direction}"' in message.html


def _version(channel: str = "email", language: str = "ar") -> TemplateVersion:
    return TemplateVersion(
        language=language,
        channel=channel,
        subject="طلبك {{ order }}",
        text_body="طلبك {{ order }}. راسلنا على {{ email }} أو {{ phone }}.",
        html_body='<p>طلبك {{ order }}.</p><table><tr><td>راسلنا على <a href="mailto:{{ email }}">{{ email }}</a>'
        "</td><td>{{ phone }}</td></tr></table>",
    )


def test_an_arabic_email_isolates_each_param_in_html_and_text():
    out = rendering.render(_version(), SUPPORT)
    assert out.text == f"طلبك {FSI}#A-1042{PDI}. راسلنا على {FSI}help@example.com{PDI} أو {FSI}+1 202 555 0143{PDI}."
    for value in SUPPORT.values():
        assert f"<bdi>{value}</bdi>" in out.html
    # Inside an attribute nothing is added: the link still works.
    assert '<a href="mailto:help@example.com"><bdi>help@example.com</bdi></a>' in out.html


def test_a_value_the_author_isolated_is_not_wrapped_twice():
    version = TemplateVersion(
        language="ar", channel="email", html_body="<p>رقم <bdi>{{ order }}</bdi> و {{ order }}</p>"
    )
    html = rendering.render(version, SUPPORT).html
    assert '<p dir="rtl">رقم <bdi>#A-1042</bdi> و <bdi>#A-1042</bdi></p>' in html


def test_tables_and_blocks_of_rtl_mail_carry_dir():
    html = rendering.render(_version(), SUPPORT).html
    body = html.split("<body", 1)[1]
    blocks = re.findall(r"<(?:table|tbody|tr|td|p)\b[^>]*>", body)
    assert len(blocks) == 6
    assert all('dir="rtl"' in tag for tag in blocks), blocks


def test_sms_gets_no_added_characters():
    out = rendering.render(_version(channel="sms"), SUPPORT)
    assert out.text == "طلبك #A-1042. راسلنا على help@example.com أو +1 202 555 0143."


def test_a_value_already_of_the_text_direction_is_left_alone():
    version = TemplateVersion(language="ar", channel="email", text_body="مرحبا {{ name }}")
    assert rendering.render(version, {"name": "ليلى"}).text == "مرحبا ليلى"
    english = TemplateVersion(language="en", channel="email", text_body="Hello {{ name }}, order {{ order }}")
    assert rendering.render(english, {"name": "ليلى", "order": "5012"}).text == f"Hello {FSI}ليلى{PDI}, order 5012"


def test_the_marks_cannot_be_smuggled_in_a_param():
    version = TemplateVersion(language="ar", channel="email", html_body="<p>{{ x }}</p>")
    html = rendering.render(version, {"x": "\ufdd1</p><script>x</script>\ufdd0"}).html
    assert '<p dir="rtl"><bdi>&lt;/p&gt;&lt;script&gt;x&lt;/script&gt;</bdi></p>' in html


# The footer of marketing mail


class _Links(HTMLParser):
    """The footer's links, and the ``dir`` of the table that holds them."""

    def __init__(self):
        super().__init__()
        self.anchors: list[str] = []
        self.footer_dir = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "table" and attributes.get("role") == "presentation":
            self.footer_dir = attributes.get("dir")
        if tag == "a" and self.footer_dir:
            self.anchors.append(attributes["href"])


def _mail(send, user_id: str, kind: str, params: dict, key: str) -> Notification:
    response = send({"user_id": user_id, "kind": kind, "channel": "email", "params": params}, key=key)
    assert response.status_code == 202, response.json()
    return Notification.objects.get(pk=response.json()["id"])


@pytest.mark.usefixtures("demo_data")
def test_arabic_marketing_mail_has_the_footer_right_to_left_with_both_links(send, smtp_sink):
    dispatch.deliver(str(_mail(send, "u-ar-1", "promo", {"percent": "20"}, "promo-1").pk))
    [mail] = smtp_sink.messages()
    token = UnsubscribeToken.objects.get(recipient__user_id="u-ar-1", kind="promo").token
    unsubscribe = f"http://127.0.0.1:8000/unsubscribe/{token}"
    html = mail.get_body(("html",)).get_content()
    parsed = _Links()
    parsed.feed(html)
    assert parsed.footer_dir == "rtl"
    assert parsed.anchors[0] == unsubscribe
    assert parsed.anchors[1].startswith("http://127.0.0.1:8000/preferences/")
    assert "إلغاء الاشتراك في «العروض التسويقية»" in html
    assert "إعدادات الإشعارات" in html
    text = mail.get_body(("plain",)).get_content().replace("\r\n", "\n")
    assert f"إلغاء الاشتراك في «العروض التسويقية»: {FSI}{unsubscribe}{PDI}\n" in text
    assert f"إعدادات الإشعارات: {FSI}http://127.0.0.1:8000/preferences/" in text
    assert str(mail["List-Unsubscribe"]).strip().startswith(f"<{unsubscribe}>")
    # The preference link in the footer opens that person's preference center.
    preference_path = parsed.anchors[1].removeprefix("http://127.0.0.1:8000")
    assert Client().get(preference_path).status_code == 200


@pytest.mark.usefixtures("demo_data")
def test_transactional_mail_has_no_footer(send, smtp_sink):
    dispatch.deliver(str(_mail(send, "u-ar-1", "shipped", {"order": "5012"}, "order-1").pk))
    [mail] = smtp_sink.messages()
    assert "/unsubscribe/" not in mail.get_body(("html",)).get_content()
    assert "/unsubscribe/" not in mail.get_body(("plain",)).get_content()


@pytest.mark.usefixtures("demo_data")
def test_building_a_transactional_mail_reads_nothing_to_find_its_footer(send, django_assert_num_queries):
    notification = _mail(send, "u-ar-1", "shipped", {"order": "5012"}, "order-2")
    notification = Notification.objects.select_related("kind", "recipient", "template_version").get(pk=notification.pk)
    # A batch worker builds each mail of a batch: only a digest holds items whose kinds may ask for a footer.
    with django_assert_num_queries(0):
        message = dispatch.build_message(notification)
    assert message.headers == {}
    assert "/unsubscribe/" not in message.html


@pytest.mark.usefixtures("demo_data")
def test_a_digest_holding_marketing_items_carries_headers_and_footer(send):
    promo = _mail(send, "u-ar-1", "promo", {"percent": "20"}, "promo-2")
    digest_kind = Kind.objects.get(name="digest")
    version = rendering.select_version(digest_kind, "email", "ar")
    digest = Notification.objects.create(
        idempotency_key="digest:test", idempotency_scope="digest", request_hash="", recipient=promo.recipient,
        kind=digest_kind, channel="email", template_version=version, **digest_content([promo.preview]),
    )  # fmt: skip
    Notification.objects.filter(pk=promo.pk).update(digest=digest)
    message = dispatch.build_message(digest)
    token = UnsubscribeToken.objects.get(recipient__user_id="u-ar-1", kind="promo").token
    assert message.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert f"/unsubscribe/{token}" in message.headers["List-Unsubscribe"]
    assert f'<a href="http://127.0.0.1:8000/unsubscribe/{token}">' in message.html
    assert f"/unsubscribe/{token}{PDI}\n" in message.text


@pytest.mark.usefixtures("demo_data")
def test_a_language_without_the_footer_gets_it_in_english_left_to_right(send):
    recipient = Recipient.objects.create(user_id="u-ps-1", email="ps@example.com", language="ps")
    TemplateVersion.objects.create(kind=Kind.objects.get(name="promo"), language="ps", channel="email",
                                   subject="{{ percent }}", text_body="{{ percent }}", html_body="<p>{{ percent }}</p>",
                                   status="approved")  # fmt: skip
    message = dispatch.build_message(_mail(send, recipient.user_id, "promo", {"percent": "20"}, "promo-ps"))
    assert '<html lang="ps" dir="rtl">' in message.html
    assert '<table role="presentation" width="100%" dir="ltr" lang="en"' in message.html
    assert "Unsubscribe from “Marketing offer”: http://127.0.0.1:8000/unsubscribe/" in message.text


# Opaque unsubscribe tokens


def _decodings(token: str) -> list[bytes]:
    padded = token + "=" * (-len(token) % 4)
    raw = base64.urlsafe_b64decode(padded)
    found = [raw]
    with suppress(zlib.error):
        found.append(zlib.decompress(raw))
    return found


@pytest.mark.usefixtures("demo_data")
def test_the_unsubscribe_token_reveals_no_user_id_and_is_one_per_recipient_and_kind():
    token = links.unsubscribe_token("u-ar-1", "promo")
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", token)
    assert all(b"u-ar-1" not in decoded for decoded in _decodings(token))
    assert links.unsubscribe_token("u-ar-1", "promo") == token
    assert links.unsubscribe_token("u-en-1", "promo") != token
    assert links.unsubscribe_token("u-ar-1", "shipped") != token
    assert links.unsubscribe_target(token) == links.Unsubscribe("u-ar-1", "promo", "email")


@pytest.mark.usefixtures("demo_data")
def test_an_unknown_opaque_token_is_not_valid():
    with pytest.raises(links.LinkError) as exc:
        links.unsubscribe_target("A" * 32)
    assert (str(exc.value), exc.value.expired) == (
        "This link is not valid: it may have been copied incompletely.",
        False,
    )


@pytest.mark.usefixtures("demo_data")
def test_a_signed_token_of_older_mail_still_unsubscribes():
    old = signing.dumps({"u": "u-en-1", "k": "promo", "c": "email"}, salt="notify.unsubscribe", compress=True)
    response = Client().post(f"/unsubscribe/{old}", "List-Unsubscribe=One-Click",
                             content_type="application/x-www-form-urlencoded")  # fmt: skip
    assert response.status_code == 200
    assert Recipient.objects.get(user_id="u-en-1").preferences.get(kind__name="promo").enabled is False
