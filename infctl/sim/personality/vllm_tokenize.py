"""vLLM's ``/tokenize`` and ``/detokenize`` on the simulated engine (vLLM 0.32:
``entrypoints/serve/tokenize``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from aiohttp import web

from infctl import tokens
from infctl.sim import prompt_tokens
from infctl.sim.personality import vllm_checks as checks
from infctl.sim.personality.engine_view import EngineView
from infctl.sim.personality.http_json import SimHTTPError, json_response, read_json_object
from infctl.tokenization import WordTokenizer


class TokenizeRoutes:
    """The two endpoints of one engine; ``accepts_model`` says which ``model`` names it serves."""

    def __init__(self, engine: EngineView, accepts_model: Callable[[object], bool]) -> None:
        self.engine = engine
        self._accepts_model = accepts_model
        # /detokenize can only invert ids it has seen: generated words and /tokenize'd prompts.
        words = {tokens.output_word(seed, i) for seed in range(4) for i in range(64)}
        self._vocab: dict[int, str] = dict(zip(tokens.token_ids(" ".join(words)), words, strict=True))

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/tokenize", self.tokenize), web.post("/detokenize", self.detokenize)]

    async def tokenize(self, request: web.Request) -> web.Response:
        """vLLM's ``/tokenize``: ``prompt`` (special tokens added unless ``add_special_tokens`` is false) or
        ``messages`` (rendered by the chat template, as for a chat request), answered with the ids, their
        count and the context length."""
        body = await read_json_object(request)
        chat = _tokenize_request(body)
        if not self._accepts_model(body.get("model")):
            raise SimHTTPError(404, f"The model `{body['model']}` does not exist.", param="model")
        tok = self.engine.tokenizer
        if chat:
            checks.check_chat_template(body, trusted=self.engine.settings.trust_request_chat_template)
            ids = await prompt_tokens.tokenized(
                tok, prompt_tokens.chat_chars(body), prompt_tokens.chat_ids, body, True
            )
        else:
            prompt = body["prompt"]
            ids = await prompt_tokens.tokenized(tok, len(prompt), prompt_tokens.text_ids, prompt, body)
        strs = None
        if isinstance(tok, WordTokenizer):
            # /detokenize inverts the simulator's words it has seen; a real tokenizer's ids stay opaque.
            words = (
                WordTokenizer.chat_text(
                    prompt_tokens.messages_of(body), generation_prompt=WordTokenizer.generation_prompt(body)
                )
                if chat
                else body["prompt"]
            ).split()
            if len(self._vocab) < 100_000:
                self._vocab.update(zip(ids, words, strict=True))
            strs = words if body.get("return_token_strs") else None
        cap = self.engine.capacity.max_model_len
        return json_response({"count": len(ids), "max_model_len": cap, "tokens": ids, "token_strs": strs})

    async def detokenize(self, request: web.Request) -> web.Response:
        body = await read_json_object(request)
        ids = body.get("tokens")
        if not isinstance(ids, list):
            kind = (
                ("missing", "Field required")
                if ids is None
                else ("list_type", "Input should be a valid list")
            )
            raise checks.invalid(("body.tokens", *kind, ids))
        for i, t in enumerate(ids):
            if type(t) is not int or t < 0:
                raise checks.invalid(
                    (f"body.tokens.{i}", "greater_than_equal", "Input should be a valid integer >= 0", t)
                )
        return json_response({"prompt": " ".join(self._vocab.get(int(i), "<unk>") for i in ids)})


def _tokenize_request(body: Mapping[str, Any]) -> bool:
    """Which of vLLM's ``/tokenize`` request models ``body`` is (True: the chat one), or vLLM's validation
    error (0.32: ``TokenizeCompletionRequest | TokenizeChatRequest``; a body fitting both is a chat)."""
    messages, prompt = body.get("messages"), body.get("prompt")
    if isinstance(messages, list):
        if body.get("continue_final_message") and body.get("add_generation_prompt"):
            raise SimHTTPError(
                400, "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
            )
        return True
    if isinstance(prompt, str):
        return False
    missing = ("missing", "Field required")
    raise checks.invalid(
        (
            "body.prompt",
            *(missing if prompt is None else ("string_type", "Input should be a valid string")),
            prompt,
        ),
        (
            "body.messages",
            *(missing if messages is None else ("list_type", "Input should be a valid list")),
            messages,
        ),
    )
