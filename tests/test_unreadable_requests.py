"""Requests the site cannot read get a clear 4xx on every route, never a 500 (backend/middleware.py).

Found by outside testing: ``Content-Type: application/json; charset=rot13`` and
a NUL in a user id in the path each answered 500.
"""

import pytest

pytestmark = pytest.mark.usefixtures("demo_data")

SEND = "/api/v1/notifications"
BODY = b'{"user_id": "u-ar-1", "kind": "otp", "params": {"code": "123456"}}'
CONTROL = "The URL contains a control character (such as NUL)."


@pytest.mark.parametrize(
    "charset", ["rot13", "base64", "bz2", "zlib", "hex", "undefined", "unicode_escape", "utf-16", "utf-7", "idna",
                "latin-1", "no-such-charset", ""],
)  # fmt: skip
def test_a_body_in_another_charset_than_utf8_is_refused_415(api, charset):
    response = api.post(SEND, BODY, content_type=f"application/json; charset={charset}", HTTP_IDEMPOTENCY_KEY="k1")
    assert response.status_code == 415
    assert response.json() == {
        "error": "unsupported_media_type",
        "message": f"The charset {charset!r} of the body is not supported: send UTF-8.",
    }


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x"])
def test_a_form_in_another_charset_is_refused_415_on_the_site_too(client, content_type):
    response = client.generic("POST", "/templates/preview/", b"a=b", content_type=f"{content_type}; charset=rot13")
    assert response.status_code == 415
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content.decode() == "The charset 'rot13' of the body is not supported: send UTF-8."


@pytest.mark.parametrize("charset", ["utf-8", "UTF8", "us-ascii", None])
def test_utf8_and_ascii_bodies_are_read(api, charset):
    content_type = "application/json" + (f"; charset={charset}" if charset else "")
    response = api.post(SEND, BODY, content_type=content_type, HTTP_IDEMPOTENCY_KEY=f"k-{charset}")
    assert response.status_code == 202, response.content


API_PATHS = [
    "/api/v1/users/{}",
    "/api/v1/users/{}/preferences",
    "/api/v1/users/{}/devices",
    "/api/v1/users/{}/preference-link",
    "/api/v1/users/{}/inbox-token",
    "/api/v1/users/{}/inbox",
    "/api/v1/users/{}/inbox/read-all",
    "/api/v1/users/{}/inbox/1/read",
    "/api/v1/notifications/{}",
]
SITE_PATHS = ["/preferences/{}", "/preferences/{}/channel", "/unsubscribe/{}", "/inbox/{}/", "/inbox/{}/messages"]
BAD = ["%00", "%01", "%0a", "%1b", "%7f", "%c2%80"]  # NUL, SOH, LF, ESC, DEL, a C1 control


@pytest.mark.parametrize("method", ["get", "put", "post", "delete"])
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("path", API_PATHS)
def test_a_control_character_in_an_api_path_is_400(api, path, bad, method):
    response = getattr(api, method)(path.format(f"u{bad}1"))
    assert response.status_code == 400
    assert response.json() == {"error": "bad_request", "message": CONTROL}


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("path", SITE_PATHS)
def test_a_control_character_in_a_page_path_is_400(client, path, bad, method):
    response = getattr(client, method)(path.format(f"t{bad}1"))
    assert response.status_code == 400
    assert response.content.decode() == CONTROL


def test_ordinary_paths_and_queries_pass(api):
    assert api.get("/api/v1/users/u-ar-1").status_code == 200
    assert api.get("/api/v1/users/u-ar-1?note=line%0Atwo").status_code == 200


@pytest.mark.parametrize(("method", "status"), [("get", 200), ("head", 200), ("options", 405), ("post", 405)])
def test_the_api_docs_page_answers_get_and_refuses_other_methods(client, method, status):
    assert getattr(client, method)("/api/v1/docs").status_code == status  # OPTIONS was a 500


# The body nests one level more than its params; past 64 levels the parser refuses it whatever the stack depth.
@pytest.mark.parametrize(("depth", "status"), [(32, 202), (33, 422), (63, 422), (64, 400), (500, 400), (900, 400)])
def test_params_nested_deeper_than_32_levels_are_refused(api, depth, status):
    nested = "[" * (depth - 1) + "]" * (depth - 1)  # inside params: depth levels in all
    body = f'{{"user_id": "u-ar-1", "kind": "shipped", "params": {{"order": "5012", "x": {nested}}}}}'
    response = api.post(SEND, body.encode(), content_type="application/json", HTTP_IDEMPOTENCY_KEY=f"deep-{depth}")
    assert response.status_code == status  # 500 and 900 levels were a 500 (a RecursionError while rendering)
    if status == 422:
        assert response.json()["fields"] == {"params": ["Params may nest at most 32 levels deep."]}
    if status == 400:
        assert response.json()["message"] == "JSON may nest at most 64 levels deep."


# Text PostgreSQL cannot hold, anywhere in any JSON body (keys too): a 422 naming where, never a 500.
# The preferences key was a 500 found by schemathesis: the kind lookup sent the NUL to PostgreSQL.
@pytest.mark.parametrize(
    ("method", "url", "raw", "fields"),
    [
        ("put", "/api/v1/users/u-ar-1/preferences", '{"channels": {"ship\\u0000ped": {"sms": true}}}',
         {"channels": ["text may not contain NUL characters."]}),
        ("put", "/api/v1/users/u-ar-1/preferences", '{"channels": {"shipped": {"s\\ud800": true}}}',
         {"channels": ["channels.shipped: text contains an unpaired surrogate (invalid UTF-16)."]}),
        ("put", "/api/v1/users/u-new", '{"email": "a@example.com", "lang\\u0000": "en"}',
         {"body": ["text may not contain NUL characters."]}),
        ("put", "/api/v1/users/u-ar-1/devices", '{"platform": "fcm", "token": "t\\u0000"}',
         {"token": ["text may not contain NUL characters."]}),
        ("post", SEND, '{"user_id": "u-ar-1", "kind": "shipped", "params": {"order": ["1", "\\u0000"]}}',
         {"params": ["params.order.1: text may not contain NUL characters."]}),
    ],
)  # fmt: skip
def test_text_postgresql_cannot_hold_is_a_422_wherever_it_is(api, method, url, raw, fields):
    response = getattr(api, method)(url, raw.encode(), content_type="application/json", HTTP_IDEMPOTENCY_KEY="nul")
    assert (response.status_code, response.json()["fields"]) == (422, fields)


@pytest.mark.parametrize("path", ["/", "/templates/", "/templates/edit/"])
def test_an_htmx_request_naming_a_broken_current_url_goes_to_the_login_page(client, path):
    response = client.get(path, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://[::1")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/admin/login/?next={path}"


@pytest.mark.parametrize("fmt", ["api", "xml", "json%00"])
def test_an_unknown_format_is_a_404_that_says_so(api, fmt):
    response = api.get(f"/api/v1/users/u-en-1?format={fmt}")
    assert response.status_code == 404
    assert response.json()["error"] == "not_found"
    assert response.json()["message"].startswith("No such resource or format: /api/v1/users/u-en-1?format=")
