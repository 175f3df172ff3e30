"""The engine adapter protocol: every surface one engine offers the rest of infctl.

An adapter is the only place that knows an engine's metric names, HTTP paths, PD wire protocol, command
line (multi-node flags and the host ports it binds included), what a profile may ask of it and what doctor
checks on it. Everything here is pure: adapters build dicts and argument lists, they never do I/O.
The telemetry package does the scraping (``infctl.telemetry.scrape``); the router calls
``prefill_body``/``decode_body``; the local target and the manifests call ``launch_command``; the profiles
check themselves against ``profile_rules``; alert rules and dashboards read ``signal_metrics``; the bench
empties prefix caches through ``cache_reset``. The records its methods exchange are
:mod:`infctl.engines.base`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from infctl.engines.base import (
    Body,
    CacheReset,
    Diagnostics,
    HealthSpec,
    MultiNodeArgs,
    PDEndpoint,
    PDStyle,
    ProfileRules,
    RankPin,
    Role,
    SignalMetrics,
)
from infctl.engines.versions import Version
from infctl.telemetry.prometheus import MetricFamilies
from infctl.telemetry.signals import EngineSignals, LoadReport

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile


class EngineAdapter(Protocol):
    """One engine's surfaces. Implementations are stateless; module-level singletons are fine."""

    @property
    def name(self) -> str:
        """Registry key and ``ModelProfile.engine`` value: ``vllm``, ``sglang``."""
        ...

    @property
    def metrics_path(self) -> str: ...

    @property
    def metrics_hint(self) -> str:
        """What to check when /metrics cannot be read (e.g. SGLang needs ``--enable-metrics``)."""
        ...

    @property
    def wanted_metrics(self) -> frozenset[str]:
        """Every sample name :meth:`signals` reads; pass it to ``parse_metrics`` as the filter."""
        ...

    @property
    def health(self) -> HealthSpec: ...

    @property
    def load_paths(self) -> tuple[str, ...]:
        """Load endpoints to try in order (a 404 moves on to the next); empty when there is none."""
        ...

    @property
    def cache_reset(self) -> CacheReset:
        """How to empty the engine's prefix cache (and what the engine must be started with for it)."""
        ...

    @property
    def pd_style(self) -> PDStyle: ...

    @property
    def decode_serves_alone(self) -> bool:
        """Whether a PD decode engine (role ``decode``) also serves a request sent without its prefill leg,
        prefilling it itself. The router sends short prompts to such a decode engine alone; one that
        refuses them only ever gets requests paired with a prefill engine (or, with none, an aggregated
        engine takes them)."""
        ...

    @property
    def dp_rank_header(self) -> str | None:
        """Request header that pins a request to one data-parallel rank, if the engine has one (part of
        :meth:`pin_rank`, which says everything a pin needs)."""
        ...

    @property
    def dp_rank_label(self) -> str:
        """Metric label that tells a data-parallel engine's per-rank series apart (one /metrics for all
        ranks); series without it are engine-wide."""
        ...

    @property
    def rank_capacity_is_engine_total(self) -> bool:
        """Whether the KV capacity read from one rank's series (split off by :attr:`dp_rank_label`) is the
        whole engine's, every rank's pool together, rather than the rank's own; the router then gives each
        rank an equal share of it."""
        ...

    @property
    def default_image(self) -> str:
        """Container image used when the profile names none."""
        ...

    @property
    def flag_versions(self) -> Mapping[str, Version]:
        """Flag (or ``flag=value fragment``) -> the first release of the engine that accepts it, for every
        flag :meth:`launch_command` may emit that is younger than :attr:`oldest_checked`
        (:mod:`infctl.engines.versions`)."""
        ...

    @property
    def oldest_checked(self) -> Version:
        """The oldest release the flag table was checked against; images before it are refused."""
        ...

    @property
    def diagnostics(self) -> Diagnostics:
        """What doctor checks on this engine."""
        ...

    @property
    def signal_metrics(self) -> SignalMetrics:
        """Which metric carries which signal, for the alert rules and dashboards ``infctl render`` writes."""
        ...

    @property
    def profile_rules(self) -> ProfileRules:
        """What a model profile may ask of this engine (checked when the profile loads)."""
        ...

    def signals(self, families: MetricFamilies) -> EngineSignals:
        """Engine-neutral signals from parsed /metrics (filtered with :attr:`wanted_metrics` or not)."""
        ...

    def parse_load(self, body: object) -> LoadReport:
        """Parse the JSON body of one of :attr:`load_paths`; raises ``EngineError`` on a foreign shape."""
        ...

    def prefill_body(
        self, body: Mapping[str, Any], prefill: PDEndpoint, room: int | Sequence[int] | None = None
    ) -> Body:
        """The request body for the prefill leg (a new dict; ``body`` is not modified)."""
        ...

    def decode_body(
        self,
        body: Mapping[str, Any],
        prefill_response: Mapping[str, Any] | None,
        prefill: PDEndpoint,
        room: int | Sequence[int] | None = None,
    ) -> Body:
        """The request body for the decode leg.

        Sequential style needs ``prefill_response`` (the prefill leg's parsed JSON); parallel style
        needs ``room`` (the same one given to :meth:`prefill_body`) and ignores the response: a list of
        rooms, one per prompt, for a completion batch (``sglang_pd``).
        """
        ...

    def pin_rank(self, rank: int) -> RankPin:
        """How to send a request so that data-parallel rank ``rank`` (0-based) serves it."""
        ...

    def dp_ranks(self, model: ModelProfile, role: Role) -> int:
        """How many data-parallel ranks the engine :meth:`launch_command` starts for ``model`` in ``role``
        serves behind its port, as the engine resolves that command line (``extra_args`` included): what
        render labels its pods with and the router makes one backend of each (the ranks a request may be
        pinned to, the count an SGLang PD prefill's bootstrap rooms are drawn modulo)."""
        ...

    def reported_dp_ranks(self, info: object) -> int | None:
        """The data-parallel rank count in a body of ``diagnostics.server_info_paths``, which the router
        reads where rooms depend on it; None when the engine reports none there."""
        ...

    def launch_command(
        self, model: ModelProfile, *, role: Role, port: int, host: str = "0.0.0.0"
    ) -> list[str]:
        """argv that starts one engine replica serving ``model`` in ``role`` on ``host:port``."""
        ...

    def launch_env(self, model: ModelProfile, role: Role) -> dict[str, str]:
        """Environment variables the engine needs for ``model`` (the profile's own ``env`` included)."""
        ...

    def pod_ip_env(self, model: ModelProfile, role: Role) -> tuple[str, ...]:
        """Environment variables that must hold the address of the engine's own pod on Kubernetes (an
        address the engine advertises to its peers; rendered from the downward API's ``status.podIP``).
        Locally the runner sets them to the loopback address it binds."""
        ...

    def multinode_args(
        self, model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool
    ) -> MultiNodeArgs:
        """What to add to :meth:`launch_command` so that ``nodes`` pods (a LeaderWorkerSet group) are one
        replica: the leader (``leader``) serves HTTP, the workers run headless. Addresses are
        LeaderWorkerSet's variables and the rendezvous port (:mod:`infctl.engines.cmdline`)."""
        ...

    def host_port_runs(self, model: ModelProfile, role: Role) -> dict[str, int]:
        """The ports an engine of ``model`` in ``role`` binds at a fixed default (or at a fixed offset from
        its HTTP port), which engines side by side on one machine must each get their own of: name -> how
        many consecutive ports. Empty when it binds none (``infctl.local.engine_ports`` takes them)."""
        ...

    def host_port_args(self, ports: Mapping[str, int], host: str) -> list[str]:
        """The flags passing the ports :meth:`host_port_runs` asked for (each run's first port under its
        name; other names in ``ports`` are ignored), ``host`` being the address the engine binds."""
        ...

    def host_port_env(self, ports: Mapping[str, int], host: str) -> dict[str, str]:
        """The environment variables passing the ports :meth:`host_port_runs` asked for."""
        ...


__all__ = ["EngineAdapter"]
