"""What the local target runs: process specs, the plan that holds them, and port allocation (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from infctl.errors import LocalTargetError
from infctl.router.ranks import backend_id

ProcessKind = Literal["engine", "router", "autoscaler"]

START_ORDER: tuple[ProcessKind, ...] = ("engine", "router", "autoscaler")
"""Kinds start in this order, each after the previous kind is healthy; they stop in reverse order."""

LOCALHOST = "127.0.0.1"


def dp_ranks(data_parallel_size: int) -> tuple[int | None, ...]:
    """The rank each router backend of an engine with that many ranks pins: ``(None,)`` for one rank (the
    engine is a plain backend), else ``0..N-1``."""
    return (None,) if data_parallel_size == 1 else tuple(range(data_parallel_size))


def backend_ids(url: str, data_parallel_size: int) -> tuple[str, ...]:
    """The router's ids of an engine's backends: ``url``, or ``url#dpN`` for each rank N."""
    return tuple(backend_id(url, rank) for rank in dp_ranks(data_parallel_size))


@dataclass(frozen=True)
class ProcessSpec:
    """One supervised local process."""

    name: str
    """Unique within the plan; also the log file name, e.g. ``engine-g0-prefill-0``."""
    kind: ProcessKind
    argv: tuple[str, ...]
    port: int
    """The HTTP port the process serves on (127.0.0.1)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables added to the supervisor's environment."""
    health_path: str = "/health"
    role: str | None = None
    """Engines: prefill, decode or both."""
    group: str | None = None
    pool: str | None = None
    ports: Mapping[str, int] = field(default_factory=dict)
    """Further ports the process binds, by purpose: ``kv_events`` (rank 0's, the engine's base KV-events
    port), ``kv_events.dp1``... for the further ranks of a data-parallel engine, and the engine's own
    (:mod:`infctl.local.engine_ports`): ``bootstrap`` for a parallel-style PD prefill,
    ``nixl_side_channel`` (``.1``... per further rank) for a vLLM NIXL PD engine (a simulated one reports
    these without binding them), ``dp_rpc``, ``dist_init``..."""
    install_hint: str | None = None
    """What to do when the program is not installed (shown by the pre-flight check)."""
    data_parallel_size: int = 1
    """Engines: data-parallel ranks served behind ``port``. Each rank is a router backend of its own
    (:attr:`backend_ids`), and rank r publishes KV events on ``ports["kv_events"]`` + r."""

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def dp_ranks(self) -> tuple[int | None, ...]:
        """The rank each of the engine's router backends pins: ``(None,)`` for a one-rank engine."""
        return dp_ranks(self.data_parallel_size)

    @property
    def backend_ids(self) -> tuple[str, ...]:
        """The router's ids of this engine's backends: its URL, or ``URL#dpN`` for each rank N."""
        return backend_ids(self.url, self.data_parallel_size)

    @property
    def kv_events(self) -> str | None:
        """The engine's (rank 0's) KV-events endpoint, None when it publishes none; rank r's is port + r."""
        return f"tcp://{LOCALHOST}:{self.ports['kv_events']}" if "kv_events" in self.ports else None

    @property
    def health_url(self) -> str:
        return self.url + self.health_path

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["argv"] = list(self.argv)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProcessSpec:
        fields = {**data, "argv": tuple(data["argv"]), "env": dict(data["env"]), "ports": dict(data["ports"])}
        return cls(**fields)


@dataclass(frozen=True)
class LocalPlan:
    """Everything one local release runs, in start order."""

    release: str
    run_dir: Path
    """Parent of the release directory ``<run_dir>/<release>`` (logs, state.json, plan.json)."""
    model: str
    """The served model name clients put in requests."""
    specs: tuple[ProcessSpec, ...]
    reserve: tuple[ProcessSpec, ...] = ()
    """Engines planned up to the autoscaler's maximum, started only when it scales out (ports held)."""
    control_port: int | None = None
    """Port of the supervisor's control endpoint (runtime scaling), when the autoscaler runs."""
    buckets: tuple[Mapping[str, Any], ...] = ()
    """The router's length buckets, one per length pool of the profile (engines carry the pool names)."""
    max_model_len: int | None = None
    """The engines' context (prompt + output), when the profile sets one."""
    engine: str | None = None
    """The engines' kind (an ``infctl.engines`` name); None in plans written before it was kept."""

    @property
    def release_dir(self) -> Path:
        return self.run_dir / self.release

    def log_path(self, name: str) -> Path:
        return self.release_dir / "logs" / f"{name}.log"

    def stages(self) -> list[tuple[ProcessSpec, ...]]:
        """Specs grouped by kind in start order, empty kinds left out."""
        stages = [tuple(s for s in self.specs if s.kind == kind) for kind in START_ORDER]
        return [stage for stage in stages if stage]

    @property
    def entrypoint(self) -> ProcessSpec:
        """Where clients send requests: the router when the plan has one, else the first engine."""
        routers = [s for s in self.specs if s.kind == "router"]
        engines = [s for s in self.specs if s.kind == "engine"]
        if not (routers or engines):
            hint = "add engines to the profile"
            raise LocalTargetError(f"release {self.release!r} runs no engine", hint=hint)
        return (routers or engines)[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "release": self.release,
            "run_dir": str(self.run_dir),
            "model": self.model,
            "specs": [s.to_dict() for s in self.specs],
            "reserve": [s.to_dict() for s in self.reserve],
            "control_port": self.control_port,
            "buckets": [dict(b) for b in self.buckets],
            "max_model_len": self.max_model_len,
            "engine": self.engine,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LocalPlan:
        return cls(
            release=data["release"],
            run_dir=Path(data["run_dir"]),
            model=data["model"],
            specs=tuple(ProcessSpec.from_dict(s) for s in data["specs"]),
            reserve=tuple(ProcessSpec.from_dict(s) for s in data.get("reserve", ())),
            control_port=data.get("control_port"),
            buckets=tuple(data.get("buckets", ())),
            max_model_len=data.get("max_model_len"),
            engine=data.get("engine"),
        )


class PortAllocator:
    """Hands out ports from ``start`` upward, skipping those ``is_free`` rejects and those already given."""

    def __init__(self, start: int, is_free: Callable[[int], bool], *, taken: Iterable[int] = ()) -> None:
        self._next = start
        self._is_free = is_free
        self._taken = set(taken)

    def take(self) -> int:
        return self.take_run(1)

    def take_run(self, count: int) -> int:
        """The first of ``count`` consecutive ports, each free and not given yet (a data-parallel engine's
        ranks publish KV events on its base port + rank)."""
        start = self._next
        while self._next + count - 1 <= 65535:
            run = range(self._next, self._next + count)
            busy = [p for p in run if p in self._taken or not self._is_free(p)]
            if not busy:
                self._taken.update(run)
                self._next = run.stop
                return run.start
            self._next = busy[-1] + 1
        what = "free port" if count == 1 else f"{count} consecutive free ports"
        raise LocalTargetError(
            f"no {what} from {start} to 65535",
            hint="set local.base_port to a lower free range (e.g. --set local.base_port=18000)",
        )
