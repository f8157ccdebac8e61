"""How Twilio and Vonage sign the receipts they post, to check them here and to sign them in the stub.

Pure functions (no Django), so the stub providers (backend/stubs/) sign exactly as the webhooks check;
tests/test_receipt_signatures.py pins both against the vectors the providers' own SDKs test with.

Twilio (https://www.twilio.com/docs/usage/webhooks/webhooks-security): ``X-Twilio-Signature`` is
base64(HMAC-SHA1(auth token, URL + each POST parameter's name and value, sorted by name, no
separators)), the URL being the full one Twilio requested (scheme, host, path and query). Twilio's
own validator (twilio-python ``RequestValidator``) accepts the URL with and without the default port,
because Twilio is not consistent about it: so does this one.

Vonage SMS API (https://developer.vonage.com/en/getting-started/concepts/signing-messages): the
``sig`` parameter is the hex digest of "&name=value" for every other parameter sorted by name, with
"&" and "=" inside values replaced by "_"; method ``md5hash`` (the dashboard's default) is
MD5(that + secret), ``md5``/``sha1``/``sha256``/``sha512`` are HMAC of it keyed with the signature
secret (vonage-python-sdk ``Client.signature``). Hex case differs between SDKs: compared lowercased.
"""

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

VONAGE_METHODS = ("md5hash", "md5", "sha1", "sha256", "sha512")


def twilio_signature(auth_token: str, url: str, params: Iterable[tuple[str, str]]) -> str:
    """The ``X-Twilio-Signature`` Twilio sends for a POST of ``params`` (name, value pairs) to ``url``."""
    data = url + "".join(name + value for name, value in sorted(params))
    digest = hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def _port_variants(url: str) -> set[str]:
    """``url`` as given, without its port, and with the scheme's default port written out."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    bare = host.rsplit(":", 1)[0] if parts.port is not None else host
    default = {"https": 443, "http": 80}.get(parts.scheme)
    variants = {url, parts._replace(netloc=bare).geturl()}
    if default is not None:
        variants.add(parts._replace(netloc=f"{bare}:{default}").geturl())
    return variants


def twilio_signature_matches(auth_token: str, url: str, params: list[tuple[str, str]], signature: str) -> bool:
    """True when ``signature`` is Twilio's for ``url`` (with or without its port) and ``params``."""
    given = signature.encode("utf-8", "replace")
    return any(
        hmac.compare_digest(twilio_signature(auth_token, variant, params).encode(), given)
        for variant in _port_variants(url)
    )


def vonage_signature(params: Mapping[str, object], secret: str, method: str = "md5hash") -> str:
    """The ``sig`` Vonage computes over ``params`` (``sig`` itself left out), lowercase hex.

    Raises ValueError for a ``method`` other than those of ``VONAGE_METHODS``.
    """
    if method not in VONAGE_METHODS:
        raise ValueError(f"unknown Vonage signature method {method!r}: use one of {', '.join(VONAGE_METHODS)}")
    text = "".join(
        f"&{name}={str(value).replace('&', '_').replace('=', '_')}"
        for name, value in sorted(params.items())
        if name != "sig"
    )
    if method == "md5hash":
        return hashlib.md5((text + secret).encode()).hexdigest()
    return hmac.new(secret.encode(), text.encode(), getattr(hashlib, method)).hexdigest()


def vonage_signature_matches(params: Mapping[str, object], secret: str, method: str = "md5hash") -> bool:
    """True when the ``sig`` in ``params`` is Vonage's for the others, with ``secret`` and ``method``."""
    given = str(params.get("sig", "")).lower().encode("utf-8", "replace")
    return bool(given) and hmac.compare_digest(vonage_signature(params, secret, method).encode(), given)
