"""Engine adapters: the only package that knows an engine's names, paths, wire protocol and flags.

Adding an engine is one module exposing ``ADAPTER`` (an :class:`EngineAdapter`) and one line in
``_ADAPTERS`` below (or a :func:`register` call for an adapter that lives elsewhere). Everything outside
this package reads engines through :data:`ENGINES`, :func:`get_adapter` and :data:`DEFAULT_ENGINE`: the
profiles accept the registered names, and the manifests, the local target, the router, the autoscaler and
doctor ask the adapter for every fact they need (``tests/unit/engines/test_third_engine.py`` registers a
made-up engine and runs it through all of them). Outside this package a third engine touches only
``infctl.sim``, to be simulated (a personality), and ``infctl.config`` for a profile value that is new to
the schema (another ``pd.kv_connector`` or ``kv_offload.backend``).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal

from infctl.engines import sglang, vllm
from infctl.engines.adapter import EngineAdapter
from infctl.engines.base import (
    ROOM_RANK_STRIDE,
    CacheReset,
    HealthSpec,
    MultiNodeArgs,
    PDEndpoint,
    PDStyle,
    ProfileRules,
    RankPin,
    Role,
    SignalMetrics,
    new_bootstrap_room,
)
from infctl.engines.cmdline import DIST_PORT
from infctl.errors import ConfigError

Engine = Literal["vllm", "sglang"]
"""The engines shipped here, for typing; what a profile may name is whatever :data:`ENGINES` holds when it
loads (``infctl.config._engine.EngineName``)."""

DEFAULT_ENGINE: Engine = vllm.NAME
"""The engine meant where none is named: a router backend, a discovered pod without the engine label, the
autoscaler's replicas, a doctor target."""

_ADAPTERS: dict[str, EngineAdapter] = {
    vllm.NAME: vllm.ADAPTER,
    sglang.NAME: sglang.ADAPTER,
}
_SHIPPED = frozenset(_ADAPTERS)
ENGINES: MappingProxyType[str, EngineAdapter] = MappingProxyType(_ADAPTERS)
"""Engine name (as in ``ModelProfile.engine``) -> adapter; read-only (:func:`register` adds one)."""


def get_adapter(name: str) -> EngineAdapter:
    """The adapter for ``name``; a ConfigError listing the known engines otherwise."""
    try:
        return ENGINES[name]
    except KeyError:
        known = ", ".join(sorted(ENGINES))
        raise ConfigError(
            f"unknown engine {name!r}; known engines: {known}", hint=f"set engine to one of: {known}"
        ) from None


def register(adapter: EngineAdapter) -> None:
    """Add an engine kept outside this package (a plugin, a test) under ``adapter.name``; ConfigError when
    the name is taken. Profiles, manifests, the local target and the daemons take it from then on."""
    if adapter.name in _ADAPTERS:
        raise ConfigError(
            f"engine {adapter.name!r} is registered already", hint="give the adapter another name"
        )
    _ADAPTERS[adapter.name] = adapter


def unregister(name: str) -> None:
    """Remove an engine :func:`register` added; the shipped ones stay."""
    if name in _SHIPPED:
        raise ConfigError(f"engine {name!r} ships with infctl and cannot be removed")
    _ADAPTERS.pop(name, None)


__all__ = [
    "DEFAULT_ENGINE",
    "DIST_PORT",
    "ENGINES",
    "ROOM_RANK_STRIDE",
    "CacheReset",
    "Engine",
    "EngineAdapter",
    "HealthSpec",
    "MultiNodeArgs",
    "PDEndpoint",
    "PDStyle",
    "ProfileRules",
    "RankPin",
    "Role",
    "SignalMetrics",
    "get_adapter",
    "new_bootstrap_room",
    "register",
    "unregister",
]
