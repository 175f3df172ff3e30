"""Reading an upstream's HTTP/1.1 response framing for :mod:`infctl.router.http1`: the status line and
headers of a response head, and a chunk-size line. Pure functions over bytes (no I/O), so the client's
callbacks stay small and these are tested on their own."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


class ProtocolError(Exception):
    """The upstream's answer is not HTTP/1.1 the client can read."""


@dataclass(frozen=True, slots=True)
class ResponseHead:
    status: int
    reason: str
    headers: dict[str, str]
    """Header names in lower case; a repeated header keeps its last value."""
    chunked: bool
    length: int | None
    """Content-Length when the body is length-delimited, else None (chunked, or read until close)."""


def chunk_size(line: bytes) -> int:
    digits = line.split(b";", 1)[0].strip()
    if not digits or digits.strip(b"0123456789abcdefABCDEF"):
        raise ProtocolError(f"bad chunk size line {line[:40]!r}")
    return int(digits, 16)


@lru_cache(maxsize=64)
def parse_head_cached(raw: bytes) -> ResponseHead:
    """:func:`parse_head`, remembered: an engine sends the same head for every stream of the same second
    (it differs by its Date), and parsing one is ~4 us in front of each first token. Shared results: the
    heads (and their header dicts) are read, never changed."""
    return parse_head(raw)


def parse_head(raw: bytes) -> ResponseHead:
    lines = raw.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ProtocolError(f"bad header line {line[:80]!r}")
        headers[name.strip().lower()] = value.strip()
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    chunked = headers.get("transfer-encoding", "").lower().endswith("chunked")
    length: int | None = None
    if not chunked and "content-length" in headers:
        value = headers["content-length"]
        if not value.isdigit():
            raise ProtocolError(f"bad content-length {value[:40]!r}")
        length = int(value)
    return ResponseHead(int(code), reason, headers, chunked, length)
