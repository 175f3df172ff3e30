"""Service-level objectives for goodput: ``ttft=2s,tpot=50ms,e2e=10s``."""

from __future__ import annotations

from dataclasses import dataclass

from infctl import durations
from infctl.errors import ConfigError

_SLO_KEYS = {"ttft": "ttft_s", "tpot": "tpot_s", "e2e": "e2e_s", "e2el": "e2e_s"}


def parse_duration(text: str, *, default_unit: str = "s", what: str = "duration") -> float:
    """``"30s" -> 30.0``, ``"500ms" -> 0.5``, ``"2m" -> 120.0``; a bare number is in ``default_unit``."""
    return durations.parse_duration(text, what=what, default_unit=default_unit)


@dataclass(frozen=True, slots=True)
class SLO:
    """Per-request latency objectives in seconds; None means no objective on that metric.

    A request is *good* when it succeeded and meets every objective given. TPOT is undefined for a
    request with one output token, which therefore meets any TPOT objective.
    """

    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))

    def to_dict(self) -> dict[str, float]:
        """``{"ttft_ms": 2000.0, ...}`` for the objectives that are set."""
        pairs = (("ttft_ms", self.ttft_s), ("tpot_ms", self.tpot_s), ("e2e_ms", self.e2e_s))
        return {k: v * 1000.0 for k, v in pairs if v is not None}

    def __str__(self) -> str:
        return ",".join(f"{k.removesuffix('_ms')}={v:g}ms" for k, v in self.to_dict().items())


def parse_slo(text: str) -> SLO:
    """``"ttft=2s,tpot=50ms"`` -> SLO. Bare numbers are milliseconds (as ``vllm bench serve --goodput``)."""
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.replace(" ", ",").split(","))):
        key, sep, raw = part.partition("=")
        if not sep:
            key, sep, raw = part.partition(":")
        field_name = _SLO_KEYS.get(key.strip().lower())
        if not sep or field_name is None:
            raise ConfigError(
                f"--slo {text}: cannot read {part!r}",
                hint="write e.g. --slo ttft=2s,tpot=50ms,e2e=20s (keys ttft, tpot, e2e; bare numbers are ms)",
            )
        values[field_name] = parse_duration(raw, default_unit="ms", what=f"--slo {key}")
    if not values:
        raise ConfigError("--slo is empty", hint="write e.g. --slo ttft=2s,tpot=50ms")
    return SLO(**values)
