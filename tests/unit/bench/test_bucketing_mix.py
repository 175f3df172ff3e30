"""The seed's scenarios: the bucketing mix's prompts fall on the side of the cut their component says."""

from __future__ import annotations

import itertools
import statistics

import pytest

from infctl.bench.scenarios import LONG_MEAN, SHORT_MAX_TOKENS, SHORT_MEAN, bucketing_mix, bucketing_scenario
from infctl.bench.workloads import build_workload
from infctl.errors import ConfigError
from infctl.sim.cluster.scenarios.catalog import ScenarioSize, bucketing


def test_every_chat_is_short_and_every_document_long_by_the_buckets_cut() -> None:
    # The short TTFT rows select by SHORT_MAX_TOKENS: a document under it would count as a stuck chat.
    reqs = list(itertools.islice(build_workload(bucketing_mix(), "completions", 1).requests(), 2000))
    chats = [r.input_tokens for r in reqs if r.group == 0]
    docs = [r.input_tokens for r in reqs if r.group == 1]
    assert 1700 < len(chats) < 1900 and len(chats) + len(docs) == 2000
    assert max(chats) <= SHORT_MAX_TOKENS < min(docs)
    assert min(docs) >= LONG_MEAN // 2 and max(docs) <= LONG_MEAN * 3 // 2
    assert abs(statistics.mean(chats) - SHORT_MEAN) < 0.1 * SHORT_MEAN
    assert abs(statistics.mean(docs) - LONG_MEAN) < 0.1 * LONG_MEAN


def test_the_live_scenario_and_the_simulators_comparison_send_the_same_prompts() -> None:
    live = bucketing_scenario(4).workload
    sim = bucketing(ScenarioSize(engines=4, requests=40)).base.workload
    assert [c.input for c in live.components] == [c.input for c in sim.components]  # type: ignore[union-attr]


def test_without_a_profiles_pools_half_the_engines_serve_the_documents() -> None:
    assert list(bucketing_scenario(4).infctl.pools) == ["short", "short", "long", "long"]
    assert list(bucketing_scenario(3).infctl.pools) == ["short", "short", "long"]


def test_documents_are_cut_to_the_engines_context_and_a_context_too_small_is_refused() -> None:
    # profiles/local-demo.yaml serves 8,192 tokens: an uncut document would be refused by every engine.
    spec = bucketing_scenario(4, context=8192).workload
    reqs = list(itertools.islice(build_workload(spec, "completions", 1).requests(), 400))
    docs = [r for r in reqs if r.group == 1]
    assert docs and all(
        r.input_tokens > SHORT_MAX_TOKENS and r.input_tokens + r.max_tokens <= 8192 for r in docs
    )
    with pytest.raises(ConfigError, match="no room for a document"):
        bucketing_mix(context=SHORT_MAX_TOKENS + 16)
