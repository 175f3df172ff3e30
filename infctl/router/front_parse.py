"""Reading one HTTP/1.1 request head for the lean front (``infctl.router.front``): bytes in, a verdict out.

The front takes only requests it understands completely: a generation POST over HTTP/1.1 with a
Content-Length body and nothing unusual in its head. Anything else (another path or method, a chunked body,
``Expect``, HTTP/1.0, a head this parser finds odd) is aiohttp's, which answers it exactly as it would
have without the front (a 400 for a malformed head included): the verdict is then ``None``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from multidict import CIMultiDict

GENERATION_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})
MAX_HEAD_BYTES = 64 * 1024
"""A head longer than this (bytes, up to the blank line) is handed to aiohttp, which rejects it."""
_HANDED_OVER = frozenset({"transfer-encoding", "expect", "upgrade"})
_WELL_FORMED = re.compile(
    rb"POST [\x21-\x7e]+ HTTP/1\.1"  # request line: visible ASCII target, single spaces
    rb"(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*"  # fields: RFC 9110 token, no CTL
)
"""The whole head (blank line excluded), lines split on CRLF only. Anything else (a bare CR or LF, NUL,
DEL or another control byte, a name that is not a token, obs-fold, whitespace before the colon) is
aiohttp's to reject: forwarding it would smuggle headers upstream and split the response head (the
client's ``x-request-id`` is echoed)."""


@dataclass(frozen=True, slots=True)
class Head:
    """A request head the front serves itself."""

    path: str
    headers: CIMultiDict[str]
    content_length: int
    keep_alive: bool
    size: int
    """Bytes of the head, blank line included: the body starts there."""


class Incomplete(Exception):
    """The head has not fully arrived yet."""


def parse_head(buf: bytes | bytearray) -> Head | None:
    """The head at the start of ``buf``; ``None`` when the request is aiohttp's. Raises ``Incomplete``
    while the blank line has not arrived (and the head is still under ``MAX_HEAD_BYTES``)."""
    end = buf.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
    if end < 0:
        if len(buf) >= MAX_HEAD_BYTES + 4:
            return None
        raise Incomplete
    if _WELL_FORMED.fullmatch(buf, 0, end) is None:
        return None
    line, *fields = bytes(buf[:end]).decode("latin-1").split("\r\n")
    path = line.split(" ")[1].partition("?")[0]
    if path not in GENERATION_PATHS:
        return None
    headers: CIMultiDict[str] = CIMultiDict()
    for field in fields:
        name, _, value = field.partition(":")  # _WELL_FORMED: a token name, then the colon
        headers.add(name, value.strip(" \t"))
    if any(h in headers for h in _HANDED_OVER):
        return None
    lengths = set(headers.getall("content-length", []))
    if len(lengths) != 1:
        return None  # none (nothing to read) or conflicting: aiohttp answers
    length = lengths.pop()
    if not (length.isascii() and length.isdigit()):
        return None
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    return Head(path, headers, int(length), "close" not in tokens, end + 4)
