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

The engine modules know the flags (``host_port_runs``/``host_port_args`` in
:mod:`infctl.engines.vllm_launch` and :mod:`infctl.engines.sglang_launch`); this module takes the ports.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from infctl.config import ModelProfile, Role
from infctl.engines import sglang_launch, vllm_launch
from infctl.local.spec import PortAllocator

Runs = Callable[[ModelProfile, Role], dict[str, int]]
Args = Callable[[Mapping[str, int], str], list[str]]

ENGINES: dict[str, tuple[Runs, Args]] = {
    "vllm": (vllm_launch.host_port_runs, vllm_launch.host_port_args),
    "sglang": (sglang_launch.host_port_runs, sglang_launch.host_port_args),
}
"""Engine name -> (the runs of ports it needs, the flags passing them)."""

SIMULATED = frozenset({"bootstrap"})
"""The runs a simulated engine takes too: those whose port its clients name (the others it never binds)."""


def take_host_ports(
    model: ModelProfile, ports: PortAllocator, role: Role = "both", *, simulated: bool = False
) -> dict[str, int]:
    """Every port of each run the model's engine in ``role`` needs, from the allocator: ``{name: first,
    name.1: first + 1, ...}`` (all listed, so the pre-flight check and ``infctl doctor`` see each port the
    engine binds). ``simulated``: only the runs in :data:`SIMULATED`."""
    runs, _ = _engine(model)
    taken: dict[str, int] = {}
    for name, count in runs(model, role).items():
        if simulated and name not in SIMULATED:
            continue
        first = ports.take_run(count)
        taken.update({name if i == 0 else f"{name}.{i}": first + i for i in range(count)})
    return taken


def host_port_args(model: ModelProfile, ports: Mapping[str, int], host: str) -> list[str]:
    """The engine's flags for the ports :func:`take_host_ports` took (others in ``ports`` are ignored)."""
    _, args = _engine(model)
    return args(ports, host)


def placeholders(model: ModelProfile, ports: Mapping[str, int], role: Role = "both") -> dict[str, int]:
    """``{dp_rpc_port}``-style values for ``local.engine_command``: a run's first port as ``<name>_port``
    (``{bootstrap_port}`` on an SGLang prefill engine)."""
    runs, _ = _engine(model)
    return {f"{name}_port": ports[name] for name in runs(model, role) if name in ports}


def _engine(model: ModelProfile) -> tuple[Runs, Args]:
    return ENGINES.get(model.engine, (_none, _no_args))


def _none(model: ModelProfile, role: Role) -> dict[str, int]:
    return {}


def _no_args(ports: Mapping[str, int], host: str) -> list[str]:
    return []
