"""The ports a real engine binds besides its HTTP port and KV-events ports, taken from the plan's port block
so that engines side by side on this machine never share one (pure).

What a data-parallel engine opens, read in vLLM 0.32.0 (the CPU build ``.ci/slow`` installs: ``vllm/config/
parallel.py``, ``engine/arg_utils.py``, ``v1/engine/utils.py``, ``v1/engine/coordinator.py``,
``utils/network_utils.py``) for ``--data-parallel-size N`` behind one API server:

- ``--data-parallel-rpc-port`` (``-dpp``, default 29550 for every engine): the engine-core handshake's ROUTER
  socket, bound only when the handshake goes over TCP (``--data-parallel-hybrid-lb``/``-external-lb``,
  ``--data-parallel-start-rank``, ``--enable-elastic-ep``, ranks on other nodes); with all N ranks here it
  is an IPC path. Two such engines on one machine would both bind 29550 (or the second's ranks would
  handshake with the first's front end), so each engine gets its own (``dp_rpc``), passed by flag.
- The DP coordinator's three sockets and the engines' input/output sockets: IPC paths under
  ``VLLM_RPC_BASE_PATH`` (a temporary directory, uuid names), or ``tcp://host:0`` bound by the kernel.
- The DP process group (MoE models only; dense ranks are independent engines, ``reconfigure_for_
  independent_dp_rank``): a coordination TCPStore on port 0 whose rank 0 binds port 0 and publishes the
  kernel's choice. ``data_parallel_master_port`` (29500) and its list of 5 ``get_open_ports_list`` ports
  are fall-backs, and ``VLLM_DP_MASTER_PORT``/``VLLM_DP_MASTER_IP`` apply only to offline SPMD (size 1 in
  the engine args). ``VLLM_PORT`` would make every ``get_open_port`` scan up from one fixed port, which is
  how two ranks of one engine would collide (vllm-project/vllm#43206): it is left unset.
- ``--data-parallel-address`` (default ``--master-addr``, 127.0.0.1) and ``--master-port`` (29501, only with
  ``--nnodes`` > 1): nothing to change on one machine.
- KV events: rank r publishes on the configured endpoint's port + r (``offset_endpoint_port``, with the
  rank's ``data_parallel_index``), which the plan already reserves as a run.

Checked live (``tests/e2e/test_vllm_dp.py``: two engines of 2 ranks each on this 2-core box): besides its
HTTP port, each engine's process tree listened on ~26 ports, all kernel-assigned (32768+), none shared and
none of 29500/29501/29550; each rank served requests pinned to it (``X-data-parallel-rank``).

SGLang (``srt/server_args.py`` ``PortArgs.init_new``, ``srt/managers/data_parallel_controller.py``): plain
``--dp-size N`` uses IPC and a free NCCL port per rank (held while the ranks start), and a fixed
``--nccl-port`` or ``--dist-init-addr`` would be shared by all N ranks, so it gets nothing. With
``--enable-dp-attention`` every socket is TCP: ``--dist-init-addr``'s port (default ``--port`` + 233 on one
node) + 0..6 and + 13, so two engines on HTTP ports less than 14 apart collide; each gets its own run
(``dist_init``), passed as ``--dist-init-addr 127.0.0.1:PORT``.

SGLang PD (``srt/disaggregation``): a prefill engine serves its bootstrap server (where decode engines
meet it, ``bootstrap_room`` by ``bootstrap_room``) on ``--disaggregation-bootstrap-port``, default 8998 and
one value per profile; two local prefill engines would both bind it. Each gets its own (``bootstrap``),
which the planner writes into that engine's model (``pd.bootstrap_port``) and names in its router backend
(``bootstrap_port=``), so the router sends each request's ``bootstrap_port`` to the right prefill. A
simulated prefill engine gets one too: it reports it (``/server_info``) and meets its decode by it, as the
real one does, so the router's requests are the same on both.

vLLM PD on the NIXL connector (``distributed/kv_transfer/kv_connector/v1/nixl/base_scheduler.py``): every
prefill and decode engine's scheduler serves the KV handshake (its workers' metadata, all TP ranks behind
one listener) on ``VLLM_NIXL_SIDE_CHANNEL_HOST``:``VLLM_NIXL_SIDE_CHANNEL_PORT`` + its data-parallel rank
(``data_parallel_index``), default ``localhost:5600``, and names that address in each answer's
``kv_transfer_params`` (``remote_host``/``remote_port``), which the router passes to the decode leg
unchanged. Two local PD engines would both bind 5600 (a prefill and its decode too), so each gets its own
run of one port per rank (``nixl_side_channel``), passed as those two variables. A simulated engine takes
it too (its ``--nixl-side-channel-port`` reads the same variable) and names it the same way. On Kubernetes
each pod has its own IP, so the default port is every pod's.

The engine modules know the flags and variables (``host_port_runs``/``host_port_args``/``host_port_env``
in :mod:`infctl.engines.vllm_launch` and :mod:`infctl.engines.sglang_launch`); this module takes the ports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

from infctl.config import ModelProfile, Role
from infctl.engines import sglang_launch, vllm_launch
from infctl.local.spec import PortAllocator

Runs = Callable[[ModelProfile, Role], dict[str, int]]
Args = Callable[[Mapping[str, int], str], list[str]]
Env = Callable[[Mapping[str, int], str], dict[str, str]]


class HostPorts(NamedTuple):
    """What an engine module knows about its host ports."""

    runs: Runs
    """The runs of ports an engine of a model in a role needs: name -> how many consecutive ports."""
    args: Args
    """The flags passing them (given the ports taken and the address to bind)."""
    env: Env
    """The environment variables passing them."""


def _none(model: ModelProfile, role: Role) -> dict[str, int]:
    return {}


def _no_args(ports: Mapping[str, int], host: str) -> list[str]:
    return []


def _no_env(ports: Mapping[str, int], host: str) -> dict[str, str]:
    return {}


ENGINES: dict[str, HostPorts] = {
    "vllm": HostPorts(vllm_launch.host_port_runs, vllm_launch.host_port_args, vllm_launch.host_port_env),
    "sglang": HostPorts(sglang_launch.host_port_runs, sglang_launch.host_port_args, _no_env),
}
"""Engine name -> what its module knows about its host ports."""
NONE = HostPorts(_none, _no_args, _no_env)
"""An engine with no host ports of its own."""

SIMULATED = frozenset({"bootstrap", "nixl_side_channel"})
"""The runs a simulated engine takes too: those whose port its clients name (the others it never binds)."""


def take_host_ports(
    model: ModelProfile, ports: PortAllocator, role: Role = "both", *, simulated: bool = False
) -> dict[str, int]:
    """Every port of each run the model's engine in ``role`` needs, from the allocator: ``{name: first,
    name.1: first + 1, ...}`` (all listed, so the pre-flight check and ``infctl doctor`` see each port the
    engine binds). ``simulated``: only the runs in :data:`SIMULATED`."""
    taken: dict[str, int] = {}
    for name, count in _engine(model).runs(model, role).items():
        if simulated and name not in SIMULATED:
            continue
        first = ports.take_run(count)
        taken.update({name if i == 0 else f"{name}.{i}": first + i for i in range(count)})
    return taken


def host_port_args(model: ModelProfile, ports: Mapping[str, int], host: str) -> list[str]:
    """The engine's flags for the ports :func:`take_host_ports` took (others in ``ports`` are ignored)."""
    return _engine(model).args(ports, host)


def host_port_env(model: ModelProfile, ports: Mapping[str, int], host: str) -> dict[str, str]:
    """The engine's environment variables for the ports :func:`take_host_ports` took
    (``VLLM_NIXL_SIDE_CHANNEL_PORT``/``_HOST`` on a vLLM NIXL PD engine, simulated or real)."""
    return _engine(model).env(ports, host)


def placeholders(model: ModelProfile, ports: Mapping[str, int], role: Role = "both") -> dict[str, int]:
    """``{dp_rpc_port}``-style values for ``local.engine_command``: a run's first port as ``<name>_port``
    (``{bootstrap_port}`` on an SGLang prefill engine, ``{nixl_side_channel_port}`` on a vLLM NIXL PD one)."""
    runs = _engine(model).runs(model, role)
    return {f"{name}_port": ports[name] for name in runs if name in ports}


def _engine(model: ModelProfile) -> HostPorts:
    return ENGINES.get(model.engine, NONE)
