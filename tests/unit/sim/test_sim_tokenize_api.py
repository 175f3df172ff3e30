"""The simulated vLLM's ``/tokenize`` and ``/detokenize`` answer as vLLM 0.32 does: its request models
(``TokenizeCompletionRequest | TokenizeChatRequest``, ``DetokenizeRequest``) and error handlers. The
expected bodies were taken from vLLM 0.32's own models and handlers mounted in FastAPI (2026-12-02)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
CHAT = [{"role": "user", "content": "hello big world"}]


async def post(url: str, path: str, body: Any) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        return await client.post(f"{url}{path}", json=body)


async def test_answers_carry_vllms_fields_and_a_body_with_both_is_a_chat(sim_url: str) -> None:
    text = (await post(sim_url, "/tokenize", {"model": MODEL, "prompt": "hello big world"})).json()
    assert set(text) == {"count", "max_model_len", "tokens", "token_strs"}
    assert text["count"] == len(text["tokens"]) and text["token_strs"] is None
    chat = (await post(sim_url, "/tokenize", {"messages": CHAT})).json()
    both = (await post(sim_url, "/tokenize", {"prompt": "hello", "messages": CHAT})).json()
    assert both == chat and chat["count"] > text["count"]
    # messages that are no list: the body is a completion request if its prompt is one.
    assert (await post(sim_url, "/tokenize", {"prompt": "hello big world", "messages": "x"})).json() == text


@pytest.mark.parametrize(
    ("body", "param", "kinds"),
    [
        (
            {"model": MODEL},
            "body.prompt",
            ["'missing', 'loc': 'body.prompt'", "'missing', 'loc': 'body.messages'"],
        ),
        ({"prompt": 5}, "body.prompt", ["'string_type', 'loc': 'body.prompt'", "'loc': 'body.messages'"]),
        ({"prompt": ["a"]}, "body.prompt", ["'string_type'"]),
        (
            {"messages": "x"},
            "body.prompt",
            ["'missing', 'loc': 'body.prompt'", "'list_type', 'loc': 'body.messages'"],
        ),
    ],
)
async def test_a_body_neither_request_model_takes_is_vllms_validation_error(
    sim_url: str, body: dict[str, Any], param: str, kinds: list[str]
) -> None:
    resp = await post(sim_url, "/tokenize", body)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "Bad Request" and error["code"] == 400 and error["param"] == param
    assert error["message"].startswith("2 validation errors:\n  {'type': ")
    assert all(k in error["message"] for k in kinds)


async def test_refusals_after_validation_are_vllms(sim_url: str) -> None:
    both = await post(
        sim_url,
        "/tokenize",
        {"messages": CHAT, "continue_final_message": True, "add_generation_prompt": True},
    )
    assert both.status_code == 400
    assert both.json()["error"] == {
        "message": "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    unknown = await post(sim_url, "/tokenize", {"model": "other", "prompt": "hi"})
    assert unknown.status_code == 404
    error = unknown.json()["error"]
    assert error["type"] == "NotFoundError" and error["param"] == "model" and "`other`" in error["message"]


@pytest.mark.parametrize(
    ("body", "param"),
    [({}, "body.tokens"), ({"tokens": "x"}, "body.tokens"), ({"tokens": [1, -1]}, "body.tokens.1")],
)
async def test_detokenize_validates_its_ids_as_vllm_does(
    sim_url: str, body: dict[str, Any], param: str
) -> None:
    resp = await post(sim_url, "/detokenize", body)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "Bad Request" and error["param"] == param
    assert error["message"].startswith("1 validation error:\n")
