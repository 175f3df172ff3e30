"""The ports a real engine binds besides its HTTP port and KV-events ports, taken from the plan's port block
so that engines side by side on this machine never share one (pure).

Which ports an engine binds at a fixed default, and the flags or variables that move them, are the adapter's
(``EngineAdapter.host_port_runs``/``host_port_args``/``host_port_env``; what each engine opens and why is told
in :mod:`infctl.engines.vllm_launch` and :mod:`infctl.engines.sglang_launch`); this module takes the ports
from the plan's block, and names which runs a simulated engine takes too (:data:`SIMULATED`).
"""

from __future__ import annotations

from collections.abc import Mapping

from infctl.config import ModelProfile, Role
from infctl.engines import get_adapter
from infctl.local.spec import PortAllocator

SIMULATED = frozenset({"bootstrap", "nixl_side_channel"})
"""The runs a simulated engine takes too: those whose port its clients name (the others it never binds)."""


def take_host_ports(
    model: ModelProfile, ports: PortAllocator, role: Role = "both", *, simulated: bool = False
) -> dict[str, int]:
    """Every port of each run the model's engine in ``role`` needs, from the allocator: ``{name: first,
    name.1: first + 1, ...}`` (all listed, so the pre-flight check and ``infctl doctor`` see each port the
    engine binds). ``simulated``: only the runs in :data:`SIMULATED`."""
    taken: dict[str, int] = {}
    for name, count in get_adapter(model.engine).host_port_runs(model, role).items():
        if simulated and name not in SIMULATED:
            continue
        first = ports.take_run(count)
        taken.update({name if i == 0 else f"{name}.{i}": first + i for i in range(count)})
    return taken


def host_port_args(model: ModelProfile, ports: Mapping[str, int], host: str) -> list[str]:
    """The engine's flags for the ports :func:`take_host_ports` took (others in ``ports`` are ignored)."""
    return get_adapter(model.engine).host_port_args(ports, host)


def host_port_env(model: ModelProfile, ports: Mapping[str, int], host: str) -> dict[str, str]:
    """The engine's environment variables for the ports :func:`take_host_ports` took (a sequential-style PD
    engine's KV side channel, simulated or real)."""
    return get_adapter(model.engine).host_port_env(ports, host)


def placeholders(model: ModelProfile, ports: Mapping[str, int], role: Role = "both") -> dict[str, int]:
    """``{dp_rpc_port}``-style values for ``local.engine_command``: a run's first port as ``<name>_port``
    (``{bootstrap_port}`` on an SGLang prefill engine, ``{nixl_side_channel_port}`` on a vLLM NIXL PD one)."""
    runs = get_adapter(model.engine).host_port_runs(model, role)
    return {f"{name}_port": ports[name] for name in runs if name in ports}
