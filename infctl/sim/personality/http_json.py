"""JSON over HTTP as the engines' FastAPI servers do it: bodies read, answers written, and the refusals
(``SimHTTPError``) whose bodies a personality shapes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from aiohttp import web

_ERROR_TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError"}


def error_type(status: int) -> str:
    """vLLM-style error type for an HTTP status (``BadRequestError``, ``ServiceUnavailableError``...)."""
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        return "Error"
    return phrase.title().replace(" ", "").replace("-", "") + "Error"


class SimHTTPError(Exception):
    """A request the engine refuses; the personality shapes the body."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        err_type: str | None = None,
        generation: bool = False,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.err_type = err_type or error_type(status)
        self.generation = generation
        """The generation failed (vLLM's ``GenerationError``), not the request's checks: a chat stream has
        had its role chunk before the error event (``routes._refuse``)."""


def compact_json(obj: Any) -> str:
    """JSON as FastAPI (vLLM, SGLang) writes it: no spaces, UTF-8 kept."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def json_response(body: Any, *, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON answer as FastAPI's ``JSONResponse`` sends it: ``application/json``, no charset."""
    head = {"Content-Type": "application/json", **(headers or {})}
    return web.Response(body=compact_json(body).encode(), status=status, headers=head)


async def read_json_object(request: web.Request) -> dict[str, Any]:
    """The request's JSON object body, or a 400 shaped by the personality."""
    try:
        body = await request.json()
    except ValueError:
        raise SimHTTPError(400, "JSON decode error: the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise SimHTTPError(400, "Input should be a valid dictionary")
    return body


def int_field(body: Mapping[str, Any], key: str, minimum: int) -> int | None:
    """``body[key]`` as an integer of at least ``minimum`` (None when absent), or a 400."""
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SimHTTPError(400, f"{key} must be an integer", param=key)
    if value < minimum:
        raise SimHTTPError(400, f"{key} must be at least {minimum}, got {value}.", param=key)
    return value
