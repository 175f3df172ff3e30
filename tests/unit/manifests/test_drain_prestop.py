"""The engines' preStop hook waits for every request the engine holds, an SGLang PD engine's queues too."""

from __future__ import annotations

from pathlib import Path

from infctl.config import load_deployment
from infctl.engines import sglang, vllm
from infctl.manifests.drain import prestop_command

PROFILES = Path(__file__).parents[3] / "profiles"


def names(profile: str) -> list[str]:
    return prestop_command(load_deployment(PROFILES / profile), 8000, leader=True)[7:]


def test_an_sglang_pd_engine_is_idle_only_when_its_pd_queues_are_empty() -> None:
    waited = names("deepseek-v3-group.yaml")
    # A decode stopped with requests in its transfer queue loses them (their KV is on its way).
    assert sglang.NUM_DECODE_TRANSFER_QUEUE_REQS in waited
    assert sglang.NUM_DECODE_PREALLOC_QUEUE_REQS in waited
    assert sglang.NUM_PREFILL_BOOTSTRAP_QUEUE_REQS in waited
    # A prefill stopped while its KV is being sent fails the decode's transfer.
    assert sglang.NUM_PREFILL_INFLIGHT_QUEUE_REQS in waited
    assert waited[:2] == [sglang.NUM_RUNNING_REQS, sglang.NUM_QUEUE_REQS]


def test_vllm_waits_on_running_and_waiting() -> None:
    assert names("qwen3-8b-aggregated.yaml") == [vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING]
