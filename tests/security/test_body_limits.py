"""The body cap holds whether or not a request declares its length. Against the real server (uvicorn): a body
that declares both Content-Length and Transfer-Encoding is refused, a chunked body is counted as it arrives, and a
request without a key is refused before its body is read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live_service import LiveService, live_service

from .helpers import raw_http

CHUNK = b"x" * 65536
FRAMED = b"10000\r\n" + CHUNK + b"\r\n"  # one 64 KiB chunk in chunked framing


@pytest.fixture(scope="module")
def server() -> Iterator[LiveService]:
    with live_service("security") as service:
        yield service


def head(*lines: str) -> bytes:
    return ("\r\n".join(["POST /v1/predictions HTTP/1.1", "Host: test", "Content-Type: application/json", *lines])
            + "\r\n\r\n").encode()


def test_content_length_together_with_transfer_encoding_is_refused_unread(server):
    status, sent = raw_http(server.url, head(f"X-API-Key: {server.api_key}", "Transfer-Encoding: chunked",
                                             "Content-Length: 5"), [FRAMED] * 80)

    assert status == 400
    assert sent < 80  # answered long before the 5 MB the request sent


def test_a_chunked_body_past_the_limit_gets_413_as_soon_as_the_limit_is_passed(server):
    status, sent = raw_http(server.url, head(f"X-API-Key: {server.api_key}", "Transfer-Encoding: chunked"),
                            [FRAMED] * 80)

    assert status == 413
    assert sent < 80


def test_a_request_without_a_key_is_refused_before_its_body_is_read(server):
    status, sent = raw_http(server.url, head("Transfer-Encoding: chunked"), [FRAMED] * 80)

    assert status == 401
    assert sent < 80


def test_a_large_declared_body_without_a_key_gets_401_not_413(client):
    answer = client.post("/v1/predictions", content=b"{" + b" " * 200_000 + b"}",
                         headers={"Content-Type": "application/json"})

    assert answer.status_code == 401


def test_an_unknown_key_is_refused_before_the_body_too(client):
    answer = client.post("/v1/predictions", content=b"{" + b" " * 200_000 + b"}",
                         headers={"Content-Type": "application/json", "X-API-Key": "us_made-up"})

    assert answer.status_code == 401
