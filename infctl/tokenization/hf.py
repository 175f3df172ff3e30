"""The model's own tokenizer: Hugging Face ``tokenizers`` (Rust; it releases the GIL) and its chat template.

Loaded from a model directory (``tokenizer.json``, ``tokenizer_config.json``, ``chat_template.jinja`` or
``chat_template.json``: the files vLLM and SGLang read) or from a ``tokenizer.json`` alone (completions only).
A request's own ``chat_template`` (vLLM serves it only with ``--trust-request-chat-template``) is rendered
instead of the model's: a name among the model's named templates, or a template itself.
Chat prompts are split at the special tokens the template writes (``<|im_start|>``...) and each piece between
them is tokenized once and remembered: the tokenizer treats those tokens as hard boundaries, so the pieces'
ids joined are the whole prompt's ids, and a conversation that grows turn by turn costs only its new turn.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from infctl.tokenization.base import FALLBACK, Tokenizer, TokenizerError
from infctl.tokenization.chat import ChatTemplate, request_tools, template_kwargs
from infctl.tokens import Memo

PIECE_MEMO_BYTES = 32 << 20
"""Memory bound of the remembered chat pieces (bytes, approximate: text + 8 per id)."""
MIN_MEMO_CHARS = 256
"""Pieces shorter than this are tokenized every time (cheaper than remembering them)."""
REQUEST_TEMPLATE_BYTES = 4 << 20
"""Memory bound of the compiled templates requests brought (bytes, approximate: 4 per source character):
a client sends the same template with every request, and compiling one costs milliseconds."""


class HFTokenizer(Tokenizer):
    exact = True
    off_loop_chars = 2048
    """~0.3-0.5 ms of a byte-level BPE on one core here (~1.5 ms per 2,000 tokens)."""

    def __init__(
        self,
        raw: Any,
        *,
        name: str,
        template: ChatTemplate | None,
        named: Mapping[str, str] | None = None,
        special_tokens: Mapping[str, str] | None = None,
    ) -> None:
        """``template``: the model's default chat template; ``named``: its named templates (name -> source),
        which a request's ``chat_template`` may name; ``special_tokens``: the variables every template is
        rendered with (``bos_token``...; default: ``template``'s)."""
        self._tok = raw
        self._fast = hasattr(raw, "encode_batch_fast")
        self.name = name
        self.template = template
        self.named = dict(named or {})
        given = special_tokens if special_tokens is not None else template and template.special_tokens
        self.special_tokens = dict(given or {})
        self._requested: Memo[str, ChatTemplate] = Memo(REQUEST_TEMPLATE_BYTES)
        added = raw.get_added_tokens_decoder()
        plain = all(
            not (t.lstrip or t.rstrip or t.single_word or (t.normalized and not t.special))
            for t in added.values()
        )
        specials = sorted((t.content for t in added.values() if t.content), key=len, reverse=True)
        # Splitting by hand is only exact when added tokens match as plain strings (no strip options).
        self._split = re.compile("|".join(map(re.escape, specials))) if specials and plain else None
        self._added = {t.content: i for i, t in added.items()}
        self._memo: Memo[str, tuple[int, ...]] = Memo(PIECE_MEMO_BYTES)
        if self._split is not None and not self._split_is_exact(specials[-1]):
            self._split = None
        self._memo.clear()
        with_special = raw.encode("a", add_special_tokens=True).ids
        bare = raw.encode("a", add_special_tokens=False).ids
        at = _find(with_special, bare)
        self._prefix = with_special[:at] if at >= 0 else []
        self._suffix = with_special[at + len(bare) :] if at >= 0 else []

    def _ids(self, text: str) -> Sequence[int]:
        """The ids alone: ``encode_batch_fast`` (tokenizers >= 0.20) skips the character offsets ``encode``
        computes, ~30% of the CPU on 2,000-token prompts (``benchmarks/bench_token_count.py``)."""
        if self._fast:
            return self._tok.encode_batch_fast([text], add_special_tokens=False)[0].ids  # type: ignore[no-any-return]
        return self._tok.encode(text, add_special_tokens=False).ids  # type: ignore[no-any-return]

    def _split_is_exact(self, special: str) -> bool:
        """Whether pieces tokenized apart join to the whole text's ids for this tokenizer's normalizer
        and pre-tokenizer (a Metaspace that prepends only to the first piece would not)."""
        pad = "x" * MIN_MEMO_CHARS
        probes = (
            f"{pad} hello{special}world ",
            f"{pad}\n{special}\n 你好 {pad}",
            f" {special}  a {special}{pad}",
        )
        tok = self._tok
        return all(list(tok.encode(p, add_special_tokens=False).ids) == self._pieces(p) for p in probes)

    @classmethod
    def from_path(cls, path: Path) -> HFTokenizer:
        """Load from a model directory or a ``tokenizer.json`` file (TokenizerError naming the file)."""
        try:
            from tokenizers import Tokenizer as RawTokenizer
        except ImportError:  # pragma: no cover - a dependency of infctl
            raise TokenizerError("the 'tokenizers' package is not installed") from None
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise TokenizerError(f"no tokenizer.json at {path}", hint=FALLBACK)
        try:
            raw = RawTokenizer.from_file(str(file))
        except Exception as exc:  # the Rust side raises plain Exception on a bad file
            raise TokenizerError(f"{file} is not a tokenizer.json that loads: {exc}", hint=FALLBACK) from None
        config = _read_json(file.parent / "tokenizer_config.json")
        source, named = _templates(file.parent, config)
        specials = {k: _token_text(v) for k, v in config.items() if k.endswith("_token")}
        tokens = {k: v for k, v in specials.items() if v is not None}
        template = ChatTemplate(source, tokens) if source else None
        where = file.parent if file.name == "tokenizer.json" else file
        return cls(raw, name=f"hf:{where}", template=template, named=named, special_tokens=tokens)

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        ids = self._pieces(text)
        return [*self._prefix, *ids, *self._suffix] if special else ids

    def count(self, text: str, *, special: bool = True) -> int:
        n = len(self._pieces(text))
        return n + (len(self._prefix) + len(self._suffix) if special else 0)

    @functools.cached_property
    def largest_id(self) -> int | None:
        # On first use: it builds the whole vocabulary as a dict, and only the simulator asks.
        return max(self._tok.get_vocab(with_added_tokens=True).values(), default=None)

    def chat_ids(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> list[int]:
        # vLLM 0.32 (ChatParams, renderers/params.py): the request's chat_template_kwargs override what
        # its fields set (``tools`` too); ``chat_template`` and ``tokenize`` among them are
        # apply_chat_template's own arguments, not template variables. The request's ``chat_template or``
        # the kwargs' one is the template (build_chat_params, get_apply_chat_template_kwargs).
        kwargs = template_kwargs(options.get("chat_template_kwargs"), options.get("reasoning_effort"))
        own = kwargs.pop("chat_template", None)
        tools = kwargs.pop("tools") if "tools" in kwargs else request_tools(options.get("tools"))
        # tokenize: transformers tokenizes the text (no special tokens) and vLLM takes those ids as they are.
        tokenized = bool(kwargs.pop("tokenize", False))
        field = options.get("chat_template") or None
        text = self.chat_template(field or own, tools=tools).render(
            messages,
            tools=tools,
            add_generation_prompt=bool(options.get("add_generation_prompt", True)),
            continue_final_message=bool(options.get("continue_final_message", False)),
            chat_template_kwargs=kwargs,
            parts=self._reads_parts(tools) if field is None and own is not None else None,
        )
        return self.encode(text, special=bool(options.get("add_special_tokens", False)) and not tokenized)

    def _reads_parts(self, tools: object) -> bool:
        """Whether the model's template (its ``tool_use`` one with ``tools``) reads contents as parts: vLLM
        0.32 decides the content format by the template the request's field picks
        (``_resolve_chat_template_content_format`` reads ``ChatParams.chat_template``), so a template
        coming in ``chat_template_kwargs`` gets contents as the model's would ("string" with none)."""
        try:
            return self.chat_template(None, tools=tools).parts
        except TokenizerError:
            return False

    def chat_template(self, requested: object = None, *, tools: object = None) -> ChatTemplate:
        """The template a chat request renders with, picked as vLLM 0.32 has transformers'
        ``get_chat_template`` pick it: none requested, the model's named ``tool_use`` template when the
        request has ``tools`` (any list, an empty one too) and the model has one, else its default; a
        name among the model's named templates standing for that template; any other string being the
        template itself (an empty one too: ``chat_ids`` has made an empty request field None)."""
        if requested is not None and not isinstance(requested, str):
            raise TokenizerError("'chat_template' must be a string")
        if requested is None:
            if tools is not None and "tool_use" in self.named:
                requested = "tool_use"
            elif self.template is None:
                raise TokenizerError(
                    f"{self.name} has no chat template, so chat requests cannot be tokenized",
                    hint="name the model directory (tokenizer_config.json or chat_template.jinja beside it)",
                )
            else:
                return self.template
        source = self.named.get(requested, requested)
        if self.template is not None and source == self.template.source:
            return self.template
        compiled = self._requested.get(source)
        if compiled is None:
            compiled = ChatTemplate(source, self.special_tokens)
            self._requested.put(source, compiled, 4 * len(source) + 1000)
        return compiled

    def _pieces(self, text: str) -> list[int]:
        split = self._split
        if split is None or len(text) < 2 * MIN_MEMO_CHARS:
            return list(self._ids(text))
        out: list[int] = []
        pos = 0
        for m in split.finditer(text):
            if m.start() > pos:
                out.extend(self._piece(text[pos : m.start()]))
            out.append(self._added[m.group()])
            pos = m.end()
        if pos < len(text):
            out.extend(self._piece(text[pos:]))
        return out

    def _piece(self, text: str) -> Sequence[int]:
        if len(text) < MIN_MEMO_CHARS:
            return self._ids(text)
        hit = self._memo.get(text)
        if hit is None:
            hit = tuple(self._ids(text))
            if self._memo.seen_before(text):
                self._memo.put(text, hit, sys.getsizeof(text) + 8 * len(hit) + 100)
        return hit


def _find(haystack: Sequence[int], needle: Sequence[int]) -> int:
    for i in range(len(haystack) - len(needle) + 1):
        if list(haystack[i : i + len(needle)]) == list(needle):
            return i
    return -1


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TokenizerError(f"{path} is not valid JSON: {exc}", hint=FALLBACK) from None
    return data if isinstance(data, dict) else {}


def _templates(directory: Path, config: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """The model's default chat template and its named ones, from where transformers saves them:
    ``chat_template.jinja`` (recent), ``chat_template.json``, or ``tokenizer_config.json``'s
    ``chat_template`` (a string, or a list of named templates of which ``default`` is the default)."""
    jinja = directory / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), {}
    value = _read_json(directory / "chat_template.json").get("chat_template", config.get("chat_template"))
    if isinstance(value, list):
        pairs = ((t.get("name"), t.get("template")) for t in value if isinstance(t, dict))
        named = {k: v for k, v in pairs if isinstance(k, str) and isinstance(v, str)}
        return named.get("default"), named
    return (value if isinstance(value, str) else None), {}


def _token_text(value: object) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None
