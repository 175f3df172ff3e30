"""Fakes for the walk's unit tests: a traffic object in memory, scripted gate windows, a fake clock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from infctl.cutover.backends import Observed, stale_error
from infctl.cutover.gates import GroupStats


@dataclass
class MemoryBackend:
    """A traffic object whose version is bumped on every write; ``before_write`` plays a concurrent writer."""

    weights: dict[str, float] = field(default_factory=lambda: {"old": 100.0, "new": 0.0})
    annotations: dict[str, str] = field(default_factory=dict)
    version: int = 1
    writes: list[dict[str, int]] = field(default_factory=list)
    before_write: Callable[[MemoryBackend], None] | None = None

    @property
    def where(self) -> str:
        return "memory"

    async def read(self) -> Observed:
        return Observed(dict(self.weights), dict(self.annotations), str(self.version), tuple(self.weights))

    async def write(
        self, weights: Mapping[str, int], annotations: Mapping[str, str], expected_version: str
    ) -> Observed:
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook(self)
        if expected_version != str(self.version):
            raise stale_error(self.where, expected_version, await self.read())
        self.weights.update(weights)
        self.annotations = dict(annotations)
        self.version += 1
        self.writes.append(dict(weights))
        return await self.read()


@dataclass
class ScriptedSource:
    """Answers each window with the next stats in ``windows`` (the last one repeats)."""

    windows: Sequence[dict[str, GroupStats]]
    measured: int = 0
    groups: Sequence[str] = ()

    async def start(self) -> None:
        return None

    async def measure(self, window_s: float) -> dict[str, GroupStats]:
        out = self.windows[min(self.measured, len(self.windows) - 1)]
        self.measured += 1
        return out


@dataclass
class FakeClock:
    t: float = 1_700_000_000.0
    slept: list[float] = field(default_factory=list)
    on_sleep: Callable[[float], Awaitable[None] | None] | None = None
    """Called after each sleep with the new time (a coroutine function is awaited)."""

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds
        if self.on_sleep is not None and (pending := self.on_sleep(self.t)) is not None:
            await pending


def healthy(requests: float = 100, p99: float = 0.5, errors: float = 0) -> GroupStats:
    return GroupStats(requests, errors, 0, {0.5: p99 / 2, 0.9: p99, 0.99: p99})
