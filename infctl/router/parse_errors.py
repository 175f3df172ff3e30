"""Requests the router will not read: the refusal of transfer codings it does not decode
(:func:`coding_refusal`).

A head that is not valid HTTP/1.1 is answered by the lean front itself (``front_parse.Malformed``: a 400
in the OpenAI shape quoting none of the client's bytes). aiohttp's server answers one with its own page
(``text/plain``, HTTP/1.0, quoting up to ~100 bytes of the input) and has no public setting for it; the
router no longer rewrites that page through aiohttp's internals, so the aiohttp front (``--server
aiohttp``) and requests the lean front hands it answer as aiohttp does.
"""

from __future__ import annotations

from aiohttp import hdrs, web

from infctl.router.front_parse import transfer_coding_problem
from infctl.router.requests import error_response


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
