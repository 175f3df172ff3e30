"""The engine's own tokenizer, over HTTP: vLLM's ``/tokenize``, for when the model's files are not at hand.

Exact by construction (the engine's ids are the ones it computes prompts with), at the price of a round trip
per prompt. The requests are vLLM's (``vllm/entrypoints/serve/tokenize/protocol.py``, 0.32): a completion
prompt as ``{"model", "prompt", "add_special_tokens"}``, a chat as ``{"model", "messages",
"add_generation_prompt", "continue_final_message", "add_special_tokens", "chat_template_kwargs", "tools",
"chat_template"}`` (only the options the request set: the engine's defaults are its chat endpoint's), answered
with ``{"tokens", "count", "max_model_len", ...}``. A request's own ``chat_template`` goes along: an engine
without ``--trust-request-chat-template`` refuses it here (400) as on its chat route. vLLM's ``/tokenize``
has no ``reasoning_effort``: a chat's goes as the ``chat_template_kwargs`` its chat route derives from it
(``chat.template_kwargs``). SGLang's ``/tokenize``
takes ``messages`` too (0.5.15, 0.5.23) and renders them with its chat route's code, which departs from
vLLM's for a conversation ending with an assistant message, with ``continue_final_message``, and for
DeepSeek V4 (docs/tokens.md).

Every answer is remembered (an LRU bounded in bytes), keyed by the exact request, so a repeated prompt or
conversation, or the router asking twice about one request, costs one POST. Prompts are not split into
leading chunks remembered apart: BPE merges across any cut and SentencePiece-style tokenizers treat a
piece's start differently, so ``tokenize(a + b) == tokenize(a) + tokenize(b)`` holds only at special tokens
the endpoint does not name (``hf.py`` does this with the model's own files, where it can check).

The interface is synchronous and each call is a network round trip: ``off_loop_chars`` is -1, so servers
always call it from a worker thread (the client is thread-safe), never on their event loop. URLs are tried
in turn, starting with the last one that answered; when none does, :class:`EngineUnavailable` says which
failed and how.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from infctl.tokenization.base import CHAT_OPTIONS, Tokenizer, TokenizerError
from infctl.tokens import Memo

if TYPE_CHECKING:
    import httpx

MEMO_BYTES = 32 << 20
"""Memory bound of the remembered answers (bytes, approximate: the request's text + 8 per id)."""
CONNECT_TIMEOUT_S = 1.0
"""Seconds to connect to one engine before trying the next."""
TIMEOUT_S = 10.0
"""Seconds one engine may take to answer (a 2M-character prompt takes vLLM a few seconds to tokenize)."""

Urls = Sequence[str] | Callable[[], Sequence[str]]
"""Engine base URLs, or what returns them at each call (a router's backends that may take requests now)."""


class EngineUnavailable(TokenizerError):
    """No engine answered ``/tokenize``: the request is not at fault (a server answers 503)."""

    status = 503


class EngineTokenizer(Tokenizer):
    exact = True
    off_loop_chars = -1
    """Every prompt, even an empty one, is an HTTP round trip: never on an event loop."""

    def __init__(
        self,
        urls: Urls,
        *,
        model: str | None = None,
        timeout_s: float = TIMEOUT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        memo_bytes: int = MEMO_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``urls``: engine base URLs (``http://host:8000``) or a function returning them; ``model``: the
        name sent in ``model`` (default: each engine's first ``/v1/models`` entry)."""
        import httpx  # only a router or benchmark that tokenizes on the engine needs its client

        self._urls = urls
        self.model = model
        where = "the router's backends" if callable(urls) else ",".join(u.rstrip("/") for u in urls)
        self.name = f"engine:{where}"
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s), transport=transport, trust_env=False
        )
        self._errors: tuple[type[Exception], ...] = (httpx.HTTPError, ValueError)
        self._memo: Memo[str, tuple[int, ...]] = Memo(memo_bytes)
        self._models: dict[str, str | None] = {}
        self._lock = threading.Lock()
        self._last_good: str | None = None
        self.posts = 0
        """``/tokenize`` requests sent (answered or not): what the memo saves shows here."""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        key = f"p{int(special)}{text}"
        return list(self._ids(key, {"prompt": text, "add_special_tokens": special}))

    def count(self, text: str, *, special: bool = True) -> int:
        return len(self._ids(f"p{int(special)}{text}", {"prompt": text, "add_special_tokens": special}))

    def chat_ids(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> list[int]:
        body: dict[str, Any] = {"messages": list(messages)}
        body.update((k, options[k]) for k in CHAT_OPTIONS if options.get(k) is not None)
        effort = body.pop("reasoning_effort", None)
        if effort is not None:
            from infctl.tokenization.chat import template_kwargs  # jinja2 only when a chat names an effort

            body["chat_template_kwargs"] = template_kwargs(body.get("chat_template_kwargs"), effort)
        try:
            key = "c" + json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise TokenizerError(f"the chat request cannot be sent as JSON: {exc}") from None
        return list(self._ids(key, body))

    def close(self) -> None:
        self._client.close()

    def _ids(self, key: str, body: dict[str, Any]) -> tuple[int, ...]:
        hit = self._memo.get(key)
        if hit is None:
            hit = self._tokenize(body)
            self._memo.put(key, hit, sys.getsizeof(key) + 8 * len(hit) + 100)
        return hit

    def _tokenize(self, body: dict[str, Any]) -> tuple[int, ...]:
        urls = [u.rstrip("/") for u in (self._urls() if callable(self._urls) else self._urls)]
        if not urls:
            raise EngineUnavailable(
                "no engine to tokenize on: the router has no backend taking requests now",
                hint="wait for a backend to pass its health checks, or name the model's tokenizer files",
            )
        last = self._last_good
        if last in urls:
            urls.remove(last)
            urls.insert(0, last)
        failures: list[str] = []
        for url in urls:
            try:
                ids = self._post(url, body)
            except _Refused as refused:
                raise TokenizerError(f"{url}/tokenize refused the prompt: {refused}") from None
            except _Unusable as exc:
                failures.append(f"{url}: {exc}")
                continue
            self._last_good = url
            return ids
        raise EngineUnavailable(
            f"no engine answered /tokenize ({'; '.join(failures)})",
            hint="check that the engines are up and serve vLLM's /tokenize, or name the model's tokenizer "
            "files (--tokenizer PATH) or --tokenizer estimate",
        )

    def _post(self, url: str, body: dict[str, Any]) -> tuple[int, ...]:
        try:
            return self._post_once(url, body)
        except self._errors as exc:  # connection, timeout, a body that is not JSON
            text = str(exc)
            raise _Unusable(f"{type(exc).__name__}: {text}" if text else type(exc).__name__) from None

    def _post_once(self, url: str, body: dict[str, Any]) -> tuple[int, ...]:
        model = self.model if self.model is not None else self._model_of(url)
        payload = body if model is None else {"model": model, **body}
        with self._lock:
            self.posts += 1
        resp = self._client.post(f"{url}/tokenize", json=payload)
        if resp.status_code in (400, 422):
            raise _Refused(_error_message(resp))
        if resp.status_code != 200:
            raise _Unusable(f"HTTP {resp.status_code} {_error_message(resp)}".rstrip())
        answer = resp.json()
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list) or not all(type(t) is int for t in tokens):
            raise _Unusable("the answer has no 'tokens' list of ids (not vLLM's /tokenize)")
        return tuple(tokens)

    def _model_of(self, url: str) -> str | None:
        """The first model ``url`` serves (``/v1/models``), looked up once; None when it names none."""
        with self._lock:
            if url in self._models:
                return self._models[url]
        resp = self._client.get(f"{url}/v1/models")
        if resp.status_code != 200:
            raise _Unusable(f"/v1/models answered HTTP {resp.status_code}")
        answer = resp.json()
        data = answer.get("data") if isinstance(answer, dict) else None
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        model = first.get("id") if isinstance(first.get("id"), str) else None
        with self._lock:
            self._models[url] = model
        return model


class _Refused(Exception):
    """The engine refused the request itself (a 400): every engine would."""


class _Unusable(Exception):
    """This engine answered, but not with ids: another may."""


def _error_message(resp: httpx.Response) -> str:
    """The message of an engine's error body (vLLM: ``{"error": {"message"}}``; FastAPI: ``{"detail"}``)."""
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if "detail" in body:
            return str(body["detail"])[:200]
    return resp.text[:200]
