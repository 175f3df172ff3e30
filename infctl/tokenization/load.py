"""Which tokenizer a setting names, and loading it.

A setting is one of:

* ``auto`` (the default): nothing named, so the language-independent ``estimate``;
* ``estimate``: that estimate, said explicitly;
* ``words``: the simulator's convention (a router or benchmark in front of ``infctl sim``);
* ``engine:URL[,URL...][,model=NAME]``: the engines' own ``/tokenize`` (vLLM's), tried in turn; ``engine``
  alone (or ``engine:model=NAME``) asks the caller's ``engines`` for the URLs at each call (a router: its
  backends taking requests now);
* a path: a model directory holding ``tokenizer.json`` (and its chat template), or the file itself;
* a Hugging Face model id (``Qwen/Qwen3-8B``): its files in the local Hugging Face cache
  (``$HF_HUB_CACHE``, ``$HF_HOME/hub`` or ``~/.cache/huggingface/hub``), downloaded into it first with
  ``huggingface_hub`` when that is installed and ``HF_HUB_OFFLINE`` is not set.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from infctl.tokenization.base import FALLBACK, Tokenizer, TokenizerError
from infctl.tokenization.engine import EngineTokenizer
from infctl.tokenization.estimate import EstimateTokenizer
from infctl.tokenization.words import WordTokenizer

KEYWORDS = ("auto", "estimate", "words")
_HF_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json"]


def load_tokenizer(spec: str | None, *, engines: Callable[[], Sequence[str]] | None = None) -> Tokenizer:
    """The tokenizer ``spec`` names (see the module docstring); TokenizerError naming what failed.
    ``engines``: where ``engine`` without URLs finds them, at each call."""
    spec = (spec or "auto").strip()
    if spec in ("auto", "estimate"):
        return EstimateTokenizer()
    if spec == "words":
        return WordTokenizer()
    if spec == "engine" or spec.startswith("engine:"):
        return _engine(spec, engines)
    from infctl.tokenization.hf import HFTokenizer  # (Jinja2 for chat templates: ~0.1 s, on need)

    path = Path(spec).expanduser()
    if path.exists():
        return HFTokenizer.from_path(path)
    if _HF_ID.match(spec):
        return HFTokenizer.from_path(_hub_snapshot(spec))
    raise TokenizerError(
        f"tokenizer {spec!r}: no such file or directory, and not a Hugging Face model id",
        hint="give a model directory, a tokenizer.json or an id like Qwen/Qwen3-8B; or use --tokenizer "
        "estimate (counts by bytes and characters; no files) or words (infctl sim's convention)",
    )


def _engine(spec: str, engines: Callable[[], Sequence[str]] | None) -> EngineTokenizer:
    items = [i.strip() for i in spec.partition(":")[2].split(",") if i.strip()]
    models = [i.removeprefix("model=") for i in items if i.startswith("model=")]
    urls = [i for i in items if not i.startswith("model=")]
    bad = [u for u in urls if not re.match(r"^https?://[^/\s]+", u)]
    if bad or len(models) > 1:
        raise TokenizerError(
            f"tokenizer {spec!r}: {'not a URL: ' + bad[0] if bad else 'more than one model='}",
            hint="write engine:http://host:8000[,http://host2:8000][,model=NAME]",
        )
    model = models[0] if models else None
    if urls:
        return EngineTokenizer(urls, model=model)
    if engines is None:
        raise TokenizerError(
            f"tokenizer {spec!r}: only the router knows its engines; name them here",
            hint="write engine:http://host:8000[,http://host2:8000]",
        )
    return EngineTokenizer(engines, model=model)


def hub_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    return home / "hub"


def _hub_snapshot(model_id: str) -> Path:
    """The newest cached snapshot of ``model_id`` holding a tokenizer.json, downloading it if allowed."""
    found = _cached(model_id)
    if found is not None:
        return found
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        raise TokenizerError(
            f"tokenizer {model_id}: not in the Hugging Face cache {hub_cache()} (offline)", hint=FALLBACK
        )
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise TokenizerError(
            f"tokenizer {model_id}: not in the Hugging Face cache at {hub_cache()}",
            hint="pip install huggingface_hub to download it, or give the model directory's path",
        ) from None
    try:
        return Path(snapshot_download(model_id, allow_patterns=_FILES, cache_dir=hub_cache()))
    except Exception as exc:  # network, auth (gated models need HF_TOKEN), missing repo
        raise TokenizerError(
            f"tokenizer {model_id}: download failed: {exc}", hint="set HF_TOKEN for gated models"
        ) from None


def _cached(model_id: str) -> Path | None:
    snapshots = hub_cache() / f"models--{model_id.replace('/', '--')}" / "snapshots"
    if not snapshots.is_dir():
        return None
    candidates = [p for p in snapshots.iterdir() if (p / "tokenizer.json").is_file()]
    return max(candidates, key=lambda p: p.stat().st_mtime) if candidates else None
