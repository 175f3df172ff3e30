"""``bench --tokenizer`` against a simulated engine tokenizing with the same real tokenizer: every prompt the
workload promised at N tokens is N tokens in the engine's own ``usage``, in English, Chinese, code and mixed
text, for completions and chat."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from tokenizerkit import tiny_tokenizer

from infctl.bench import (
    BenchConfig,
    LengthDist,
    LoadPlan,
    MultiTurnSpec,
    RandomSpec,
    SharedPrefixSpec,
    Stage,
    run_benchmark,
)
from infctl.bench.config import validate_config
from infctl.bench.workloads import build_workload, make_prompts
from infctl.errors import ConfigError
from infctl.tokenization import load_tokenizer

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests

L = LengthDist
WORKLOADS: dict[str, Any] = {
    "random": RandomSpec(input=L.parse("uniform:20,600"), output=L(mean=3)),
    "shared-prefix": SharedPrefixSpec(
        groups=2, prefix_tokens=256, input=L.parse("uniform:10,80"), output=L(mean=3)
    ),
    "multi-turn": MultiTurnSpec(
        conversations=2, turns=3, system_tokens=40, input=L(mean=30), output=L(mean=4)
    ),
}


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("text", ["en", "zh", "code", "mixed"])
@pytest.mark.parametrize("kind", list(WORKLOADS))
async def test_usage_equals_the_promised_lengths(
    start_sim: Any, tiny_tokenizer: Path, kind: str, text: str, api: str
) -> None:
    path = str(tiny_tokenizer)
    sim = await start_sim(tokenizer=path, max_model_len=8192)
    spec = WORKLOADS[kind]
    load = LoadPlan(stages=[Stage(rate=200, num_requests=8)])
    cfg = BenchConfig(url=sim.urls[0], api=api, workload=spec, tokenizer=path, text=text, seed=3, load=load)  # type: ignore[arg-type]
    result = await run_benchmark(cfg)
    assert result.summary.failed == 0, result.summary.error_examples
    prompts = make_prompts(load_tokenizer(path), text)  # type: ignore[arg-type]
    expected = list(itertools.islice(build_workload(spec, api, 3, prompts).requests(), 8))  # type: ignore[arg-type]
    # The workload's own counts, which are its promise for the lengths drawn ...
    words = list(itertools.islice(build_workload(spec, api, 3).requests(), 8))  # type: ignore[arg-type]
    # (A history's length is what its turns add up to; a shared prefix in a chat adds the real template's
    # tokens where the words convention adds two markers.)
    if kind == "random" or (kind == "shared-prefix" and api == "completions"):
        assert [e.input_tokens for e in expected] == [w.input_tokens for w in words]
    # ... are the engine's: the bench reads them from usage.
    assert [r.input_tokens for r in result.requests] == [e.input_tokens for e in expected]


def test_text_is_for_the_synthetic_workloads(tmp_path: Path) -> None:
    trace = {"kind": "trace", "path": str(tmp_path / "t.jsonl")}
    with pytest.raises(ConfigError, match="text: zh is for the synthetic workloads"):
        validate_config({"url": "http://x", "workload": trace, "text": "zh", "load": {"stages": [{}]}})
