"""The model's tokenizer: ids equal to what the ``tokenizers`` library gives for the text the engine
renders, chat pieces remembered without changing a single id, and errors that name the file."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from tokenizerkit import (
    IM_END,
    IM_START,
    THINKING_TEMPLATE,
    chinese,
    code,
    english,
    thinking_model,
    tiny_tokenizer,
)
from tokenizers import Tokenizer as RawTokenizer

from infctl.tokenization import HFTokenizer, TokenizerError, load_tokenizer

__all__ = ["tiny_tokenizer"]


def raw(path: Path) -> RawTokenizer:
    return RawTokenizer.from_file(str(path / "tokenizer.json"))


def chatml(messages: list[dict[str, str]]) -> str:
    turns = "".join(f"{IM_START}{m['role']}\n{m['content']}{IM_END}\n" for m in messages)
    return f"{turns}{IM_START}assistant\n"


def test_completion_ids_are_the_librarys(tiny_tokenizer: Path) -> None:
    tok, lib = load_tokenizer(str(tiny_tokenizer)), raw(tiny_tokenizer)
    assert isinstance(tok, HFTokenizer) and tok.exact
    rng = random.Random(0)
    for text in (english(rng, 300), chinese(rng, 900), code(rng, 40), "混合 mixed テキスト 🙂", ""):
        assert tok.encode(text) == lib.encode(text).ids
        assert tok.count(text) == len(lib.encode(text).ids)


def test_the_largest_id_is_the_vocabularys_with_its_added_tokens(tiny_tokenizer: Path) -> None:
    tok = load_tokenizer(str(tiny_tokenizer))
    assert tok.largest_id == max(raw(tiny_tokenizer).get_vocab(with_added_tokens=True).values())
    # The others know no vocabulary.
    assert load_tokenizer("estimate").largest_id is None and load_tokenizer("words").largest_id is None


def test_chat_ids_are_the_rendered_templates_ids_and_a_growing_chat_gives_the_same_ids(
    tiny_tokenizer: Path,
) -> None:
    tok, lib = load_tokenizer(str(tiny_tokenizer)), raw(tiny_tokenizer)
    rng = random.Random(1)
    messages = [{"role": "system", "content": chinese(rng, 600)}]
    for turn in range(6):
        messages.append({"role": "user", "content": english(rng, 80) if turn % 2 else chinese(rng, 200)})
        want = lib.encode(chatml(messages), add_special_tokens=False).ids
        assert tok.chat_ids(messages) == want  # pieces remembered from earlier turns change nothing
        messages.append({"role": "assistant", "content": code(rng, 5)})
    assert tok.chat_ids(messages) == tok.chat_ids(messages)


def test_template_options_are_honoured(tiny_tokenizer: Path) -> None:
    tok, lib = load_tokenizer(str(tiny_tokenizer)), raw(tiny_tokenizer)
    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "The answer is"}]
    no_prompt = tok.chat_ids(messages, add_generation_prompt=False)
    assert no_prompt == lib.encode(chatml(messages).removesuffix(f"{IM_START}assistant\n")).ids
    cont = tok.chat_ids(messages, add_generation_prompt=False, continue_final_message=True)
    assert lib.decode(cont, skip_special_tokens=False).endswith("The answer is")
    with pytest.raises(TokenizerError):
        tok.chat_ids(messages, continue_final_message=True)  # with add_generation_prompt: refused, as vLLM
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert tok.chat_ids(parts) == tok.chat_ids([{"role": "user", "content": "a\nb"}])


def test_a_template_that_raises_is_a_tokenizer_error(tmp_path: Path, tiny_tokenizer: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((tiny_tokenizer / name).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = (
        "{% if messages[0]['role'] != 'user' %}{{ raise_exception('user first') }}{% endif %}x"
    )
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = load_tokenizer(str(tmp_path))
    with pytest.raises(TokenizerError, match="user first"):
        tok.chat_ids([{"role": "system", "content": "s"}])
    (tmp_path / "chat_template.jinja").write_text("{{ messages | length }}")  # takes precedence
    assert (
        load_tokenizer(str(tmp_path)).chat_ids([{"role": "user", "content": "s"}])
        == raw(tmp_path).encode("1").ids
    )


def test_files_that_do_not_load_name_themselves(tmp_path: Path, tiny_tokenizer: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(TokenizerError, match=str(bad)):
        load_tokenizer(str(tmp_path))
    with pytest.raises(TokenizerError, match="no such file or directory"):
        load_tokenizer(str(tmp_path / "nothing-here"))  # neither a path nor a model id
    only = tmp_path / "only"
    only.mkdir()
    (only / "tokenizer.json").write_bytes((tiny_tokenizer / "tokenizer.json").read_bytes())
    with pytest.raises(TokenizerError, match="no chat template"):
        load_tokenizer(str(only / "tokenizer.json")).chat_ids([{"role": "user", "content": "x"}])


def test_a_model_id_is_found_in_the_hugging_face_cache(
    tmp_path: Path, tiny_tokenizer: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap = tmp_path / "models--acme--tiny" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (snap / name).write_bytes((tiny_tokenizer / name).read_bytes())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_tokenizer("acme/tiny").encode("hello world") == raw(tiny_tokenizer).encode("hello world").ids
    with pytest.raises(TokenizerError, match="acme/absent"):
        load_tokenizer("acme/absent")


OWN = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}{{ bos_token or '' }}"
"""A request's own template (vLLM serves it with --trust-request-chat-template)."""


def test_a_requests_own_template_is_rendered_instead_of_the_models(tiny_tokenizer: Path) -> None:
    tok, lib = load_tokenizer(str(tiny_tokenizer)), raw(tiny_tokenizer)
    assert isinstance(tok, HFTokenizer)
    messages = [{"role": "user", "content": "hello 你好"}]
    want = lib.encode("[user] hello 你好\n", add_special_tokens=False).ids
    assert tok.chat_ids(messages, chat_template=OWN) == want
    assert tok.chat_ids(messages, chat_template=OWN) == want  # compiled once, remembered
    # vLLM's ``request.chat_template or default_template``: an empty one is the model's.
    assert (
        tok.chat_ids(messages, chat_template="") == tok.chat_ids(messages) == lib.encode(chatml(messages)).ids
    )
    with pytest.raises(TokenizerError, match="must be a string"):
        tok.chat_ids(messages, chat_template=["x"])
    with pytest.raises(TokenizerError, match="does not compile"):
        tok.chat_ids(messages, chat_template="{% for %}")


def test_a_request_may_name_one_of_the_models_named_templates(tmp_path: Path, tiny_tokenizer: Path) -> None:
    """transformers' ``get_chat_template``: a name among the model's templates stands for that template;
    with a single template, any string is a template itself."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((tiny_tokenizer / name).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok, lib = load_tokenizer(str(tmp_path)), raw(tmp_path)
    messages = [{"role": "user", "content": "x"}]
    assert tok.chat_ids(messages) == tok.chat_ids(messages, chat_template="default") == lib.encode("D").ids
    assert tok.chat_ids(messages, chat_template="tool_use") == lib.encode("T").ids
    assert tok.chat_ids(messages, chat_template="other") == lib.encode("other").ids
    single = load_tokenizer(str(tiny_tokenizer))
    assert single.chat_ids(messages, chat_template="tool_use") == lib.encode("tool_use").ids


@pytest.mark.parametrize(
    "template",
    [
        "{{ ''.__class__.__mro__ }}",
        "{{ messages.append(1) }}",  # immutable: a template cannot change what it renders
        # json.dumps' ``default`` and ``cls`` would call what they are given outside the sandbox's checks:
        # transformers' tojson takes only ensure_ascii, indent, separators and sort_keys.
        "{{ raise_exception | tojson(default=strftime_now) }}",
        "{{ messages | tojson(cls=namespace) }}",
        "{{ messages | tojson(allow_nan=false) }}",  # refused by transformers' tojson, so by vLLM
    ],
)
def test_a_requests_template_is_sandboxed(tiny_tokenizer: Path, template: str) -> None:
    tok = load_tokenizer(str(tiny_tokenizer))
    with pytest.raises(TokenizerError):
        tok.chat_ids([{"role": "user", "content": "x"}], chat_template=template)


def test_a_requests_template_sees_no_python_internals(tiny_tokenizer: Path) -> None:
    tok = load_tokenizer(str(tiny_tokenizer))
    assert isinstance(tok, HFTokenizer)
    messages = [{"role": "user", "content": "x"}]
    for attr in ("messages.__class__", "raise_exception.__globals__", "strftime_now.__code__"):
        assert tok.chat_template(f"{{{{ {attr} }}}}").render(messages) == ""  # undefined, not the object


def test_tojson_takes_transformers_options(tiny_tokenizer: Path) -> None:
    tok, lib = load_tokenizer(str(tiny_tokenizer)), raw(tiny_tokenizer)
    template = "{{ {'b': 1, 'a': [2]} | tojson(sort_keys=true, separators=(',', ':'), indent=none) }}"
    assert (
        tok.chat_ids([{"role": "user", "content": "x"}], chat_template=template)
        == lib.encode('{"a":[2],"b":1}').ids
    )


def named_templates(tmp_path: Path, tiny_tokenizer: Path, templates: dict[str, str]) -> HFTokenizer:
    """The tiny tokenizer with ``templates`` as its named chat templates (tokenizer_config.json's list)."""
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / name).write_bytes((tiny_tokenizer / name).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": k, "template": v} for k, v in templates.items()]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    tok = load_tokenizer(str(tmp_path))
    assert isinstance(tok, HFTokenizer)
    return tok


TOOL_USE = "{% for t in tools %}{{ t.function.name }};{% endfor %}{{ messages[0]['content'] }}"


def test_a_request_with_tools_renders_the_models_tool_use_template(
    tmp_path: Path, tiny_tokenizer: Path
) -> None:
    """transformers' ``get_chat_template``, as vLLM 0.32 calls it (``resolve_chat_template``): with no
    template requested, a request whose ``tools`` is not null renders the model's ``tool_use`` template
    when it has one (an empty list too); checked on vLLM's /tokenize with such a model."""
    tok = named_templates(
        tmp_path, tiny_tokenizer, {"default": "D{{ messages[0]['content'] }}", "tool_use": TOOL_USE}
    )
    lib = raw(tmp_path)
    messages = [{"role": "user", "content": "x"}]
    tools = [{"type": "function", "function": {"name": "get_w"}}]
    assert tok.chat_ids(messages) == tok.chat_ids(messages, tools=None) == lib.encode("Dx").ids
    assert tok.chat_ids(messages, tools=tools) == lib.encode("get_w;x").ids
    assert tok.chat_ids(messages, tools=tools, chat_template="") == lib.encode("get_w;x").ids
    assert tok.chat_ids(messages, tools=[]) == lib.encode("x").ids
    assert tok.chat_ids(messages, tools=tools, chat_template="default") == lib.encode("Dx").ids
    # The request's chat_template_kwargs' tools are the ones the template gets (and picks it by).
    assert tok.chat_ids(messages, chat_template_kwargs={"tools": tools}) == lib.encode("get_w;x").ids
    assert (
        tok.chat_ids(messages, tools=tools, chat_template_kwargs={"tools": None}) == lib.encode("get_w;x").ids
    )
    # Without a tool_use template (or any named ones), the default, tools or not.
    (tmp_path / "plain").mkdir()
    plain = named_templates(tmp_path / "plain", tiny_tokenizer, {"default": "D"})
    assert plain.chat_ids(messages, tools=tools) == lib.encode("D").ids
    single = load_tokenizer(str(tiny_tokenizer))
    assert single.chat_ids(messages, tools=tools) == single.chat_ids(messages)


def test_chat_template_kwargs_act_as_in_vllm(tiny_tokenizer: Path) -> None:
    """vLLM 0.32 (renderers/params.py ``ChatParams``; checked on its /tokenize and chat route, trusted): the
    kwargs' ``chat_template`` is the template unless the request's own field is set, with contents in the
    format the model's template reads; neither it nor ``tokenize`` is a template variable (no 400 either:
    ``resolve_chat_template_kwargs``' "unexpected" check never sees them, ``safe_apply_chat_template``
    takes both as its own arguments)."""
    tok, lib = load_tokenizer(str(tiny_tokenizer)), raw(tiny_tokenizer)
    assert isinstance(tok, HFTokenizer)
    messages = [{"role": "user", "content": "hi"}]
    parts = "{% for m in messages %}{% if m.content is string %}S{% else %}P{% endif %}{% endfor %}"
    assert tok.chat_ids(messages, chat_template_kwargs={"chat_template": "KW"}) == lib.encode("KW").ids
    # The model's ChatML reads strings: a parts-looping template from the kwargs still gets strings.
    looping = "{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}" + parts
    assert tok.chat_ids(messages, chat_template_kwargs={"chat_template": looping}) == lib.encode("S").ids
    assert tok.chat_ids(messages, chat_template=looping) == lib.encode("P").ids
    assert (
        tok.chat_ids(messages, chat_template="REQ", chat_template_kwargs={"chat_template": "KW"})
        == lib.encode("REQ").ids
    )
    assert (
        tok.chat_ids(messages, chat_template="", chat_template_kwargs={"chat_template": "KW"})
        == lib.encode("KW").ids
    )
    for unset in (None, "auto"):
        assert tok.chat_ids(messages, chat_template_kwargs={"chat_template": unset}) == tok.chat_ids(messages)
    seen = (
        "{% for v in [chat_template, tokenize, x, documents] %}{{ 'D' if v is defined else 'U' }}{% endfor %}"
    )
    for kwargs, want in (
        ({"tokenize": False, "x": None}, "UUUD"),
        ({"tokenize": True, "x": "auto"}, "UUUD"),
        ({"x": False}, "UUDD"),
    ):
        assert tok.chat_ids(messages, chat_template=seen, chat_template_kwargs=kwargs) == lib.encode(want).ids
    with pytest.raises(TokenizerError, match="chat_template_kwargs"):
        tok.chat_ids(messages, chat_template_kwargs="tokenize")


def test_tokenize_in_the_kwargs_leaves_out_special_tokens(tiny_tokenizer: Path) -> None:
    """``tokenize: true`` has transformers tokenize the text (``add_special_tokens=False``) and vLLM takes
    those ids as they are: the request's ``add_special_tokens`` adds nothing then."""
    from tokenizers.processors import TemplateProcessing

    from infctl.tokenization.chat import ChatTemplate

    lib = raw(tiny_tokenizer)
    lib.post_processor = TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", 0)])
    tok = HFTokenizer(lib, name="bos", template=ChatTemplate("{{ messages[0]['content'] }}", {}))
    messages = [{"role": "user", "content": "hello"}]
    bare = lib.encode("hello", add_special_tokens=False).ids
    assert tok.chat_ids(messages, add_special_tokens=True) == [0, *bare]
    assert tok.chat_ids(messages, add_special_tokens=True, chat_template_kwargs={"tokenize": True}) == bare
    assert tok.chat_ids(messages, add_special_tokens=True, chat_template_kwargs={"tokenize": False}) == [
        0,
        *bare,
    ]


@pytest.mark.parametrize(
    ("effort", "kwargs", "after"),
    [
        (None, None, ""),
        ("high", None, "effort: high\n"),
        ("none", None, "<think>\n\n</think>\n\neffort: none\n"),
        # The request's field over the kwargs' reasoning_effort; enable_thinking in the kwargs is theirs.
        ("none", {"reasoning_effort": "low", "enable_thinking": True}, "effort: none\n"),
        ("high", {"enable_thinking": False}, "<think>\n\n</think>\n\neffort: high\n"),
        # A null enable_thinking is dropped, yet present: nothing derived (the template sees it undefined).
        ("none", {"enable_thinking": None}, "effort: none\n"),
        (None, {"reasoning_effort": "low", "enable_thinking": False}, "<think>\n\n</think>\n\neffort: low\n"),
    ],
)
def test_reasoning_effort_reaches_the_template_as_vllm_passes_it(
    tmp_path: Path, tiny_tokenizer: Path, effort: str | None, kwargs: dict[str, Any] | None, after: str
) -> None:
    """vLLM 0.32 ``ChatCompletionRequest.build_chat_params`` (entrypoints/openai/chat_completion/protocol.py):
    the field ``reasoning_effort`` is a template variable over the kwargs' (``merge_kwargs``, None dropped),
    and unless ``"enable_thinking" in chat_template_kwargs``, ``enable_thinking = effort != "none"``."""
    tok = load_tokenizer(str(thinking_model(tmp_path / "thinking", tiny_tokenizer)))
    assert isinstance(tok, HFTokenizer) and tok.template is not None
    assert tok.template.source == THINKING_TEMPLATE
    messages = [{"role": "user", "content": "hi"}]
    want = raw(tiny_tokenizer).encode(chatml(messages) + after).ids
    options: dict[str, Any] = {"reasoning_effort": effort, "chat_template_kwargs": kwargs}
    assert tok.chat_ids(messages, **options) == want
