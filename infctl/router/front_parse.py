"""Reading one HTTP/1.1 request head for the lean front (``infctl.router.front``): bytes in, a verdict out.

The front takes only requests it understands completely: a generation POST over HTTP/1.1 with a
Content-Length body and nothing unusual in its head. Anything else (another path or method, a chunked body,
``Expect``, HTTP/1.0, a head this parser finds odd) is aiohttp's, which answers it exactly as it would
have without the front (a 400 for a malformed head included): the verdict is then ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass

from multidict import CIMultiDict

GENERATION_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})
MAX_HEAD_BYTES = 64 * 1024
"""A head longer than this (bytes, up to the blank line) is handed to aiohttp, which rejects it."""
_HANDED_OVER = frozenset({"transfer-encoding", "expect", "upgrade"})


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
    try:
        text = bytes(buf[:end]).decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    line, *fields = text.split("\r\n")
    parts = line.split(" ")
    if len(parts) != 3 or parts[0] != "POST" or parts[2] != "HTTP/1.1":
        return None
    path = parts[1].partition("?")[0]
    if path not in GENERATION_PATHS:
        return None
    headers: CIMultiDict[str] = CIMultiDict()
    for field in fields:
        name, sep, value = field.partition(":")
        if not sep or not name or name != name.strip() or not name.isascii() or " " in name:
            return None  # no name, obs-fold, whitespace before the colon: aiohttp's to judge
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
