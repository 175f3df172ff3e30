"""Reading one HTTP/1.1 request head for the lean front (``infctl.router.front``): bytes in, a verdict out.

The front takes only requests it understands completely: a generation POST over HTTP/1.1 with a
Content-Length body and nothing unusual in its head. Any other valid request (another path or method, a
chunked body, ``Expect``, HTTP/1.0) is aiohttp's, which answers it exactly as it would have without the
front: the verdict is then ``None``. A head that is not valid HTTP/1.x at all raises ``Malformed``: the
front answers it (a 400 that quotes none of its bytes) rather than hand aiohttp a head its parser would
answer with a page quoting them.

Transfer codings: a request with ``Transfer-Encoding`` is aiohttp's to frame; whichever front took the
connection, the router then refuses any coding but a single final ``chunked``
(:func:`transfer_coding_problem`, applied by the app's handlers): aiohttp's parser frames ``gzip, chunked``
as plain chunked and ignores the gzip, and a proxy must not forward a body it read differently from what
the client sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from multidict import CIMultiDict

GENERATION_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})
MAX_HEAD_BYTES = 64 * 1024
"""A head longer than this (bytes, up to the blank line) is ``Malformed``."""
MAX_LINE_BYTES = 8190
"""A longer request line or header line is ``Malformed`` (aiohttp's ``max_line_size`` and
``max_field_size``: what it would refuse too)."""
_HANDED_OVER = frozenset({"transfer-encoding", "expect", "upgrade"})
_READ = _HANDED_OVER | {"content-length", "connection"}
_WELL_FORMED = re.compile(
    rb"POST [\x21-\x7e]+ HTTP/1\.1"  # request line: visible ASCII target, single spaces
    rb"(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*"  # fields: RFC 9110 token, no CTL
)
"""A generation POST's whole head (blank line excluded), lines split on CRLF only. Anything else (a bare CR
or LF, NUL, DEL or another control byte, a name that is not a token, obs-fold, whitespace before the colon)
is never served here: forwarding it would smuggle headers upstream and split the response head (the
client's ``x-request-id`` is echoed). It is aiohttp's if it is a valid head of another kind
(``_VALID``), else ``Malformed``."""
_VALID = re.compile(
    rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [\x21-\x7e]+ HTTP/1\.[01]"  # any method token, HTTP/1.0 or 1.1
    rb"(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*"
)
"""Any valid HTTP/1.x head, by the same field rules as ``_WELL_FORMED``."""


@dataclass(slots=True)
class Head:
    """A request head the front serves itself (read, never changed: not frozen, whose checks cost ~1 us
    per request)."""

    path: str
    headers: CIMultiDict[str]
    content_length: int
    keep_alive: bool
    size: int
    """Bytes of the head, blank line included: the body starts there."""


class Incomplete(Exception):
    """The head has not fully arrived yet."""


class Refused(Exception):
    """A request no server of this router reads: the front answers ``status`` with ``message`` itself and
    closes the connection, before its body."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


class Malformed(Refused):
    """The head is not valid HTTP/1.x (see ``_VALID``), or a line or the whole of it is too long: a 400
    that quotes none of it."""

    def __init__(self) -> None:
        super().__init__(400, "Bad Request: the request is not valid HTTP/1.1 and was not read")


def parse_head(buf: bytes | bytearray) -> Head | None:
    """The head at the start of ``buf``; ``None`` when the request is aiohttp's. Raises ``Incomplete``
    while the blank line has not arrived (and the head is still under ``MAX_HEAD_BYTES``), ``Refused`` for
    a request no server should read: ``Malformed``, or a transfer coding the router does not decode
    (:func:`transfer_coding_problem`; aiohttp's parser would answer some of those with its own page).

    In front of every request's upstream send, so written for speed (~4 us for a client's usual six
    fields): one pass over the fields, the few that decide the verdict looked at on the way, and the
    multidict built once from the list of pairs."""
    end = buf.find(b"\r\n\r\n", 0, MAX_HEAD_BYTES + 4)
    if end < 0:
        if len(buf) >= MAX_HEAD_BYTES + 4:
            raise Malformed
        if buf.find(b"\r\n", 0, MAX_LINE_BYTES + 2) < 0 and len(buf) > MAX_LINE_BYTES + 2:
            raise Malformed  # the first line alone is over the limit already
        raise Incomplete
    if end > MAX_LINE_BYTES and any(len(line) > MAX_LINE_BYTES for line in buf[:end].split(b"\r\n")):
        raise Malformed
    if _WELL_FORMED.fullmatch(buf, 0, end) is None:
        if _VALID.fullmatch(buf, 0, end) is None:
            raise Malformed
        _refuse_codings(buf, end)
        return None
    line, *fields = buf[:end].decode("latin-1").split("\r\n")
    path = line[5:-9].partition("?")[0]  # _WELL_FORMED: "POST <target> HTTP/1.1"
    if path not in GENERATION_PATHS:
        _refuse_codings(buf, end)
        return None
    pairs: list[tuple[str, str]] = []
    lengths: set[str] = set()
    close = False
    for field in fields:
        name, _, value = field.partition(":")  # _WELL_FORMED: a token name, then the colon
        value = value.strip(" \t")
        pairs.append((name, value))
        lower = name.lower()
        if lower in _READ:
            if lower == "content-length":
                lengths.add(value)
            elif lower == "connection":
                close = close or "close" in {t.strip().lower() for t in value.split(",")}
            else:
                _refuse_codings(buf, end)  # _HANDED_OVER
                return None
    if len(lengths) != 1:
        return None  # none (nothing to read) or conflicting: aiohttp answers
    length = lengths.pop()
    if not (length.isascii() and length.isdigit()):
        return None
    return Head(path, CIMultiDict(pairs), int(length), not close, end + 4)


def _refuse_codings(buf: bytes | bytearray, end: int) -> None:
    """Raise ``Refused`` for a head handed to aiohttp whose transfer coding the router refuses (off the
    hot path, so the head is read again here)."""
    head = bytes(buf[:end]).lower()
    if b"transfer-encoding" not in head:
        return
    values = []
    for field in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = field.partition(":")
        if name == "transfer-encoding":
            values.append(value)
    problem = transfer_coding_problem(values)
    if problem is not None:
        raise Refused(*problem)


def transfer_coding_problem(fields: Iterable[str]) -> tuple[int, str] | None:
    """What is wrong with a request's ``Transfer-Encoding`` field values, as (status, message); None when
    there are none or they say just ``chunked``. RFC 9112 section 6.1: a coding the server does not
    implement is a 501 (the router decodes none: ``gzip``, ``deflate``, ``compress``, ``identity`` and
    any other); ``chunked`` must be the last coding, once, else the body has no framing at all (400,
    whatever the other codings)."""
    codings = [c.strip().lower() for value in fields for c in value.split(",")]
    codings = [c for c in codings if c]
    if not codings or codings == ["chunked"]:
        return None
    unknown = [c for c in codings if c != "chunked"]
    if unknown and codings.count("chunked") == 1 and codings[-1] == "chunked":
        return 501, (
            f"Transfer-Encoding {', '.join(codings)}: the router decodes no transfer coding but chunked "
            f"({unknown[0]} is not implemented); send the body plain with Content-Length or chunked"
        )
    return 400, f"Transfer-Encoding {', '.join(codings)}: chunked may be applied once, last"
