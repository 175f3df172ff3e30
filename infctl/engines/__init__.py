"""Engine adapters: the only package that knows an engine's names, paths, wire protocol and flags.

Adding an engine is one module exposing ``ADAPTER`` (an :class:`EngineAdapter`) and one line in
``ENGINES`` below.
"""

from __future__ import annotations

from types import MappingProxyType

from infctl.engines import sglang, vllm
from infctl.engines.base import (
    EngineAdapter,
    HealthSpec,
    PDEndpoint,
    PDStyle,
    RankPin,
    Role,
    new_bootstrap_room,
)
from infctl.errors import ConfigError

ENGINES: MappingProxyType[str, EngineAdapter] = MappingProxyType(
    {
        vllm.NAME: vllm.ADAPTER,
        sglang.NAME: sglang.ADAPTER,
    }
)
"""Engine name (as in ``ModelProfile.engine``) -> adapter."""


def get_adapter(name: str) -> EngineAdapter:
    """The adapter for ``name``; a ConfigError listing the known engines otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        known = ", ".join(sorted(ENGINES))
        raise ConfigError(
            f"unknown engine {name!r}; known engines: {known}", hint=f"set engine to one of: {known}"
        ) from None


__all__ = [
    "ENGINES",
    "EngineAdapter",
    "HealthSpec",
    "PDEndpoint",
    "PDStyle",
    "RankPin",
    "Role",
    "get_adapter",
    "new_bootstrap_room",
]
