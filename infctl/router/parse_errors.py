"""Requests the router will not read: aiohttp's answer to one it cannot parse, made the router's (HTTP/1.1,
no client bytes echoed), and the refusal of transfer codings it does not decode (:func:`coding_refusal`).

When aiohttp's parser rejects a request head (a control character in a header, an overlong line, a bad
request line), its server answers with a pseudo-request of its own (``aiohttp.web_protocol.ERROR``, version
1.0) and a ``text/plain`` page quoting up to ~100 bytes of the offending input. A proxy should not reflect
client bytes it could not parse, and every other router error is HTTP/1.1 in the OpenAI shape. aiohttp has
no setting for this page, so the router intercepts it at the one public seam, ``web.Server.request_factory``
(what every connection's ``RequestHandler`` builds its requests with, the lean front's handed-over ones
included): the pseudo-request is rebuilt as HTTP/1.1 and, as its response is prepared, the page is replaced
by the router's own error, which names the status only (aiohttp still logs the details). The seam rests on
two aiohttp internals, the ``ERROR`` sentinel and ``_prepare_hook``; tests/integration/router pins the
behaviour, so an aiohttp release that moves either fails there rather than in production.
"""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

from aiohttp import hdrs, web, web_protocol
from aiohttp.http import HttpVersion11

from infctl.router.front_parse import transfer_coding_problem
from infctl.router.requests import error_response

_ERROR = getattr(web_protocol, "ERROR", None)
"""aiohttp's pseudo-request message for a head it could not parse (None if a release drops it: then its
page is served unchanged)."""


class _Unparsed(web.BaseRequest):
    """The request aiohttp could not parse, as HTTP/1.1, whose error page is the router's."""

    async def _prepare_hook(self, response: web.StreamResponse) -> None:
        if not isinstance(response, web.Response):
            return
        status = response.status
        try:
            phrase = HTTPStatus(status).phrase
        except ValueError:
            phrase = "Error"
        message = f"{phrase}: the request is not valid HTTP/1.1 and was not read"
        kind = "BadRequestError" if status < 500 else "InternalServerError"
        body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
        raw = json.dumps(body).encode()
        response.body = raw
        response.headers[hdrs.CONTENT_TYPE] = "application/json; charset=utf-8"
        response.headers[hdrs.CONTENT_LENGTH] = str(len(raw))


def quiet_parse_errors(server: web.Server) -> None:
    """Make ``server``'s answer to an unparseable request the router's (see the module docstring). Call it
    before the server takes connections: each connection reads the factory when it is made."""
    if _ERROR is None:
        return
    make = server.request_factory

    def factory(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        if message is not _ERROR:
            return make(message, payload, protocol, writer, task)
        loop = asyncio.get_running_loop()
        return _Unparsed(message._replace(version=HttpVersion11), payload, protocol, writer, task, loop)

    server.request_factory = factory


def coding_refusal(request: web.BaseRequest) -> web.Response | None:
    """The answer to a request whose ``Transfer-Encoding`` the router does not decode (501, or 400 for a
    misplaced ``chunked``: ``front_parse.transfer_coding_problem``), closing the connection, whose body
    was not read; None for every other request (one header lookup)."""
    fields = request.headers.getall(hdrs.TRANSFER_ENCODING, None)
    if fields is None or (problem := transfer_coding_problem(fields)) is None:
        return None
    status, message = problem
    resp = error_response(status, message, kind="NotImplementedError" if status == 501 else "BadRequestError")
    resp.force_close()
    return resp
