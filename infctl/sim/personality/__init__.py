"""Engine personalities of the simulated engine: what makes it look like vLLM or like SGLang."""

from __future__ import annotations

from infctl.sim.personality.base import Personality
from infctl.sim.personality.sglang import SglangPersonality
from infctl.sim.personality.vllm import VllmPersonality

PERSONALITIES: dict[str, type[Personality]] = {"vllm": VllmPersonality, "sglang": SglangPersonality}


def get_personality(name: str) -> type[Personality]:
    return PERSONALITIES[name]


__all__ = ["PERSONALITIES", "Personality", "SglangPersonality", "VllmPersonality", "get_personality"]
