"""A scenario for the cluster simulator, as documented dataclasses (what ``infctl simulate run`` builds).

Example (a library caller)::

    cfg = SimConfig(
        workload=TraceSpec(path=Path("mooncake.jsonl")),
        load=LoadPlan(stages=[Stage()]),          # a trace replays at its own timestamps
        engines=16,
        profile=get_profile("llama3-8b-h100"),
        policy="cache_aware",
    )
    result = simulate(cfg)                        # infctl.sim.cluster.simulate

The workload and load plan are ``infctl bench``'s own types, so a scenario that runs in the simulator
also runs against a live stack with ``infctl bench``, and both results share one schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from infctl.autoscaler.settings import PolicyConfig, UnitConfig
from infctl.autoscaler.threshold import ThresholdConfig
from infctl.bench.config import LoadPlan, Stage
from infctl.bench.slo import SLO
from infctl.bench.workloads import RandomSpec, WorkloadSpec
from infctl.config.router import router_default
from infctl.errors import ConfigError
from infctl.sim.cluster.admission import AdmissionSettings
from infctl.sim.cluster.pd import PDLayout
from infctl.sim.profiles import LLAMA3_8B_H100, SimProfile

SCRAPE_INTERVAL_S: float = router_default("scrape_interval_s")
"""The live router's default scrape interval, seconds."""
VARIANT_STEP = 0.07
"""Each variant moves the scrape interval by this share of the default, alternately shorter and longer."""
VARIANTS = 13
"""Distinct variants (intervals 58..142 ms); variant v and v + 13 are the same."""


def variant_scrape_interval(variant: int) -> float:
    """The router's scrape interval for one run of a replay: variant 0 is the live default (100 ms), then
    93, 107, 86, 114 ... 58, 142 ms, repeating after :data:`VARIANTS`.

    A trace replayed at its own timestamps sends the same requests at the same times whatever the seed,
    and policies are chaotic on it: one early decision that sees a different load reshuffles every cache
    after it, as a live run's timing noise does. Shifting when the router reads the engines' signals is
    that noise, so a few variants give the spread within which two policies do not differ
    (``benchmarks/bench_router_sim.py --variants``, ``infctl simulate compare --seed``). Arms whose
    decisions read no engine signals (random, round robin) replay identically."""
    v = variant % VARIANTS
    step = (v + 1) // 2
    return SCRAPE_INTERVAL_S * (1 + VARIANT_STEP * (step if v % 2 == 0 else -step))


@dataclass(frozen=True)
class AutoscaleSettings:
    """Run the autoscaler's policy (``infctl.autoscaler.policy.desired_replicas``) on the virtual clock."""

    policy: PolicyConfig | ThresholdConfig = field(
        default_factory=lambda: PolicyConfig(units=(UnitConfig("both", min=1, max=64),))
    )
    """Thresholds, windows, cooldowns and bounds, exactly as the daemon takes them (a ``ThresholdConfig``:
    the KEDA-style policy). One unit named ``both`` (aggregated engines); its ``min``/``max`` bound the
    fleet."""
    interval_s: float = 15.0
    """Seconds of virtual time between decisions (the daemon's ``--interval``)."""
    startup_s: float = 60.0
    """Seconds from asking for an engine to it serving (weights load, warm-up); GPU time counts from
    the ask."""
    restarts: tuple[float, ...] = ()
    """Virtual times the autoscaler daemon restarts at (a rolling upgrade, an evicted pod)."""
    restart_down_s: float = 0.0
    """Seconds each restart leaves the fleet without an autoscaler (no decisions)."""
    memory: bool = True
    """A restarted daemon restores the memory it saved after its last decision
    (``infctl.autoscaler.memory``); False: it starts cold."""

    def __post_init__(self) -> None:
        if self.interval_s <= 0 or self.startup_s < 0:
            raise ConfigError("autoscale: interval_s must be > 0 and startup_s >= 0")
        if self.restart_down_s < 0 or any(r < 0 for r in self.restarts):
            raise ConfigError("autoscale: restart times and restart_down_s must be >= 0")
        if not any(u.name == "both" for u in self.policy.units):
            raise ConfigError(
                "autoscale: the simulator scales aggregated engines: the policy needs a unit named 'both'",
                hint="e.g. PolicyConfig(units=(UnitConfig('both', min=2, max=32),))",
            )


@dataclass(frozen=True)
class SimConfig:
    """One simulated run: the fleet, the router, the autoscaler (optional) and the traffic."""

    workload: WorkloadSpec = field(default_factory=RandomSpec)
    """What to send (``infctl bench``'s workload specs: random, mixture, shared-prefix, multi-turn,
    trace...)."""
    load: LoadPlan = field(default_factory=lambda: LoadPlan(stages=[Stage(rate=10, num_requests=100)]))
    """When to send it (``infctl bench``'s load plan: rates, ramps, concurrency, trace timestamps)."""
    engines: int = 4
    """Engines at the start (and the whole fleet without autoscaling)."""
    profile: SimProfile = LLAMA3_8B_H100
    """Step-time model and KV/scheduler limits of every engine (``infctl.sim.profiles``)."""
    policy: str | Mapping[str, Any] = router_default("policy")
    """Routing policy: a preset name or a policy config dict (``infctl.router.policies.build_policy``);
    default the live router's."""
    autoscale: AutoscaleSettings | None = None
    """None: a static fleet of ``engines``."""
    scrape_interval_s: float = SCRAPE_INTERVAL_S
    """Seconds between the router's scrapes of engine signals (queue, running, KV usage); the router's own
    in-flight counts are always current, as in the live router."""
    pools: tuple[str | None, ...] = ()
    """Router pool of each engine, in start order (what a policy's length ``buckets`` route to); engines an
    autoscaler adds later join the last pool named. Empty: no pools. Live, the same placement is
    ``POST /admin/backends {"url": ..., "pool": ...}``."""
    kv_events: bool = False
    """Engines publish KV events and the router applies them to its precise prefix index (live:
    ``model.kv_events.enabled``). Only policies with ``index: precise`` or ``index: auto`` read that index;
    the ``cache_aware`` preset learns from its own decisions (the approximate index). Events reach the
    router at the end of the step that produced them."""
    router_block_size: int | None = None
    """Tokens per block of the router's prefix hashes; None: the profile's block size."""
    gpus_per_engine: int = 1
    """GPUs one engine occupies, for GPU-hours (a DeepSeek-V3 node engine: 8)."""
    api: Literal["completions", "chat"] = "completions"
    """How prompts are rendered (chat adds role markers), as in ``infctl bench``."""
    seed: int = 0
    """Seeds the workload and the arrivals; the same seed gives the same result."""
    lead_in_stages: int = 0
    """The first this many load stages warm the fleet, its caches and the autoscaler up and are not
    measured: their requests are left out of every figure, and GPU time, the fleet's replicas and scale
    events count from the end of the last of them (each needs a ``duration_s``). A diurnal day started
    with the evening before it is not the cold fleet at midnight a fresh run is, and life never is."""
    slo: SLO | None = None
    """Goodput objectives."""
    label: str = ""
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for every ``EngineCore`` (e.g. a second KV tier, once the core takes one)."""
    max_time_s: float | None = None
    """Stop the virtual clock here even if requests are still in flight (they count as timeouts)."""
    pd: PDLayout | None = None
    """Prefill/decode disaggregation: the fleet is this layout's engines (``engines`` must equal its size) and
    the router pairs them with the live ``RouterCore.route_pd``. None: aggregated engines."""
    admission: AdmissionSettings | None = None
    """The router's admission queue (hold while saturated, short first, 429 when full or past the deadline).
    None: requests are routed on arrival (the live router with ``admission_queue: 0``)."""

    @property
    def measured_from_s(self) -> float:
        """Virtual seconds after which the run is measured (the lead-in stages' end; 0 without one)."""
        return sum(s.duration_s or 0.0 for s in self.load.stages[: self.lead_in_stages])

    def __post_init__(self) -> None:
        if self.engines < 1:
            raise ConfigError(f"engines must be >= 1, got {self.engines}", hint="e.g. --engines 16")
        if self.pools and len(self.pools) != self.engines:
            raise ConfigError(f"pools names {len(self.pools)} engines, the fleet starts with {self.engines}",
                              hint="give one pool per engine")  # fmt: skip
        if self.scrape_interval_s <= 0:
            raise ConfigError("scrape_interval_s must be > 0", hint="e.g. --scrape-interval 100ms")
        if self.gpus_per_engine < 1:
            raise ConfigError("gpus_per_engine must be >= 1")
        if self.router_block_size is not None and self.router_block_size < 1:
            raise ConfigError("router_block_size must be >= 1")
        if self.max_time_s is not None and self.max_time_s <= 0:
            raise ConfigError("max_time_s must be > 0")
        if self.pd is not None:
            if self.engines != self.pd.size:
                raise ConfigError(
                    f"engines {self.engines} != the PD layout's {self.pd.size} "
                    f"({self.pd.groups} x {self.pd.prefill}P{self.pd.decode}D)",
                    hint=f"engines={self.pd.size} (the CLI: leave --engines out), or change the layout",
                )
            if self.autoscale is not None or self.pools:
                raise ConfigError(
                    "the simulator does not autoscale PD fleets or give them length pools yet",
                    hint="drop --autoscale (and pools) with --pd",
                )
        lead = self.load.stages[: self.lead_in_stages]
        if self.lead_in_stages < 0 or self.lead_in_stages >= len(self.load.stages):
            raise ConfigError(
                f"lead_in_stages {self.lead_in_stages}: expected 0..{len(self.load.stages) - 1}, so that "
                "some stage is measured"
            )
        if any(s.duration_s is None for s in lead):
            raise ConfigError("lead-in stages need a duration_s (the measured part starts where they end)")
        timed = self.workload.kind == "trace"
        for i, stage in enumerate(self.load.stages):
            if stage.mode == "replay" and not timed:
                raise ConfigError(
                    f"load.stages[{i}]: give a rate or a concurrency (only a trace has timestamps)",
                    hint="e.g. --request-rate 10",
                )
        if self.autoscale is not None:
            unit = self.autoscale.policy.unit("both")
            if not unit.min <= self.engines <= unit.max:
                raise ConfigError(
                    f"engines {self.engines} is outside the autoscaler's bounds {unit.min}..{unit.max}",
                    hint="start within --min-engines/--max-engines",
                )

    @property
    def block_size(self) -> int:
        """Tokens per block of the router's prefix hashes."""
        return self.router_block_size or self.profile.block_size
