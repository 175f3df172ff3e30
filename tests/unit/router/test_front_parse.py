"""The lean front's head parser: what it takes, what it leaves to aiohttp, what it waits for."""

from __future__ import annotations

import pytest

from infctl.router.front_parse import (
    MAX_HEAD_BYTES,
    MAX_LINE_BYTES,
    Incomplete,
    Malformed,
    Refused,
    parse_head,
)

POST = (
    b"POST /v1/completions HTTP/1.1\r\nHost: r\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n"
)


def test_a_generation_post_is_taken_with_its_length_and_body_offset() -> None:
    head = parse_head(POST + b'{"a":1}')
    assert head is not None
    assert (head.path, head.content_length, head.keep_alive) == ("/v1/completions", 7, True)
    assert head.size == len(POST)
    assert head.headers["content-type"] == "application/json"  # case-insensitive
    assert head.headers["CONTENT-TYPE"] == "application/json"


@pytest.mark.parametrize("cut", [0, 1, 10, len(POST) - 3, len(POST) - 1])
def test_a_head_cut_anywhere_before_its_blank_line_is_incomplete(cut: int) -> None:
    with pytest.raises(Incomplete):
        parse_head(POST[:cut])


def test_query_is_dropped_from_the_path_and_chat_is_taken() -> None:
    head = parse_head(POST.replace(b"/v1/completions", b"/v1/chat/completions?x=1"))
    assert head is not None and head.path == "/v1/chat/completions"


def test_connection_close_turns_keep_alive_off() -> None:
    head = parse_head(POST.replace(b"Host: r", b"Connection: keep-alive, Close"))
    assert head is not None and not head.keep_alive


@pytest.mark.parametrize(
    "raw",
    [
        POST.replace(b"POST", b"GET"),
        POST.replace(b"/v1/completions", b"/metrics"),
        POST.replace(b"HTTP/1.1", b"HTTP/1.0"),
        POST.replace(b"Content-Length: 7", b"Transfer-Encoding: chunked"),
        POST.replace(b"Host: r", b"Expect: 100-continue"),
        POST.replace(b"Content-Length: 7\r\n", b""),
        POST.replace(b"Content-Length: 7", b"Content-Length: 7\r\nContent-Length: 8"),
        POST.replace(b"Content-Length: 7", b"Content-Length: -7"),
        POST.replace(b"Content-Length: 7", b"Content-Length: \xb2"),
    ],
    ids=[
        *("get", "other-path", "http10", "chunked", "expect", "no-length", "two-lengths"),
        *("negative-length", "non-ascii-digit"),
    ],
)
def test_any_other_valid_head_is_left_to_aiohttp(raw: bytes) -> None:
    assert parse_head(raw) is None


@pytest.mark.parametrize(
    "raw",
    [
        POST.replace(b"Host: r", b"Host : r"),
        POST.replace(b"Host: r", b"Host: r\r\n folded"),
        POST.replace(b"POST /v1", b"POST  /v1"),
        POST.replace(b"HTTP/1.1", b"HTTP/2.0"),
        POST.replace(b"POST", b"GET").replace(b"Host: r", b"bad header: r"),
        POST.replace(b"POST", b"GET").replace(b"Host: r", b"X-Long: " + b"b" * MAX_LINE_BYTES),
        POST.replace(b"/v1/completions", b"/" + b"p" * MAX_LINE_BYTES),
        b"garbage\r\n\r\n",
    ],
    ids=[
        *("space-before-colon", "obs-fold", "bad-request-line", "http2-line", "get-space-in-name"),
        *("get-line-over-8190", "request-line-over-8190", "garbage"),
    ],
)
def test_a_head_that_is_not_valid_http_is_malformed_whatever_its_method(raw: bytes) -> None:
    with pytest.raises(Malformed):  # the front answers 400 itself; aiohttp's page would quote the bytes
        parse_head(raw)


def test_a_first_line_over_the_limit_is_malformed_before_the_head_ends() -> None:
    with pytest.raises(Malformed):
        parse_head(b"GET /" + b"p" * MAX_LINE_BYTES)
    with pytest.raises(Incomplete):
        parse_head(b"GET /" + b"p" * (MAX_LINE_BYTES - 100))


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b"POST /v1/completions HTTP/1.1", b"X-A: a\nTransfer-Encoding: chunked"),
        (b"POST /v1/completions HTTP/1.1", b"X-Request-Id: abc\nSet-Cookie: injected=1"),
        (b"POST /v1/completions HTTP/1.1", b"X-A: a\rTransfer-Encoding: chunked"),
        (b"POST /v1/completions HTTP/1.1", b"X-A: a\x00b"),
        (b"POST /v1/completions HTTP/1.1", b"X-A: a\x7fb"),
        (b"POST /v1/completions HTTP/1.1", b"X-A: a\x1bb"),
        (b"POST /v1/completions HTTP/1.1", b"X\x01A: b"),
        (b"POST /v1/completions HTTP/1.1", b"X(A): b"),
        (b"POST /v1/completions HTTP/1.1", b"X A: b"),
        (b"POST /v1/completions HTTP/1.1", b"Transfer-Encoding\x0b: chunked"),
        (b"POST /v1/completions HTTP/1.1", b"\tX-A: b"),
        (b"POST /v1/completions HTTP/1.1", b": b"),
        (b"POST /v1/completions HTTP/1.1", b"X-A b"),
        (b"POST /v1/completions HTTP/1.1", b"X-\xe9: b"),
        (b"POST /v1/completions\x00 HTTP/1.1", b"X-A: b"),
        (b"POST /v1/completions\tx HTTP/1.1", b"X-A: b"),
        (b"POST /v1/completions HTTP/1.1\n", b"X-A: b"),
        (b"POST /v1/completions HTTP/1.1 ", b"X-A: b"),
    ],
    ids=[
        *("bare-lf-smuggles-te", "bare-lf-splits-response", "bare-cr", "nul", "del", "esc-in-value"),
        *("ctl-in-name", "non-token-name", "space-in-name", "vtab-before-colon", "tab-led-line"),
        *("empty-name", "colonless", "non-ascii-name", "nul-in-target", "tab-in-target"),
        *("bare-lf-after-request-line", "trailing-space-in-request-line"),
    ],
)
def test_control_bytes_and_non_token_names_are_malformed(line: bytes, field: bytes) -> None:
    raw = line + b"\r\nHost: r\r\n" + field + b"\r\nContent-Length: 2\r\n\r\n{}"
    with pytest.raises(Malformed):  # a 400: nothing reaches the engine or the response head
        parse_head(raw)


def test_tabs_obs_text_and_every_token_character_still_parse() -> None:
    token = b"!#$%&'*+-.^_`|~09azAZ"
    raw = POST.replace(b"Host: r", token + b":\tv\xe9 w\t\r\nX-Empty:")
    head = parse_head(bytearray(raw))
    assert head is not None and head.size == len(raw)
    assert head.headers[token.decode()] == "v\xe9 w"
    assert head.headers["x-empty"] == ""


def test_a_head_over_the_limit_is_malformed_not_awaited_forever() -> None:
    many = b"".join(b"X-%d: %s\r\n" % (i, b"a" * 1000) for i in range(MAX_HEAD_BYTES // 1000 + 1))
    with pytest.raises(Malformed):
        parse_head(b"POST /v1/completions HTTP/1.1\r\n" + many)


def test_only_plain_chunked_is_a_transfer_coding_the_router_reads() -> None:
    from infctl.router.front_parse import transfer_coding_problem

    assert transfer_coding_problem([]) is None
    assert transfer_coding_problem(["chunked"]) is None
    assert transfer_coding_problem([" Chunked "]) is None
    for fields in (["gzip, chunked"], ["gzip", "chunked"], ["identity,chunked"], ["br, chunked"]):
        problem = transfer_coding_problem(fields)
        assert problem is not None and problem[0] == 501, fields
        assert "not implemented" in problem[1] and "Content-Length" in problem[1]
    for fields in (["chunked, chunked"], ["chunked", "chunked"]):
        assert transfer_coding_problem(fields) == (
            400,
            "Transfer-Encoding chunked, chunked: chunked may be applied once, last",
        )
    gzip_after = transfer_coding_problem(["chunked, gzip"])
    assert gzip_after is not None and gzip_after[0] == 400  # chunked not last: no framing at all


@pytest.mark.parametrize(
    ("path", "coding", "status"),
    [
        (b"/v1/completions", b"gzip, chunked", 501),
        (b"/admin/backends", b"gzip, chunked", 501),
        (b"/v1/completions", b"chunked\r\nTransfer-Encoding: chunked", 400),
        (b"/admin/backends", b"chunked, gzip", 400),
    ],
)
def test_a_transfer_coding_the_router_does_not_decode_is_refused_by_the_front(
    path: bytes, coding: bytes, status: int
) -> None:
    raw = b"POST %s HTTP/1.1\r\nHost: r\r\nTransfer-Encoding: %s\r\n\r\n" % (path, coding)
    with pytest.raises(Refused) as refused:
        parse_head(raw)
    assert refused.value.status == status and "Transfer-Encoding" in refused.value.message
    assert parse_head(raw.replace(coding, b"chunked")) is None  # plain chunked: aiohttp's to read
