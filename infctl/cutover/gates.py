"""SLO gates (pure): ``"ttft_p99<2s,error_rate<1%,ttft_p90<old*1.2"`` parsed, then judged on one window.

Metrics, all measured on the new group over the window (lower is better):

================  ==========================================================================
``ttft_p50``      router-side time to first byte, 50th/90th/99th percentile (seconds);
``ttft_p90``      bounds take ``ms``, ``s`` or ``m`` (a bare number is seconds)
``ttft_p99``
``error_rate``    failed attempts (5xx, connection failures, broken streams) / attempts
``throttle_rate`` 4xx answers (engines and gateways throttle with 429) / attempts
================  ==========================================================================

A bound is absolute (``2s``, ``500ms``, ``1%``, ``0.01``) or relative to the old group measured over the same
window: ``old*1.2``, ``old+50ms``, ``old+0.5%``, ``old``. A gate is *inconclusive* (neither passes nor fails)
when the window holds too few requests to judge; the walk then waits another interval.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infctl.cutover.plan import parse_duration
from infctl.errors import ConfigError

METRICS = ("ttft_p50", "ttft_p90", "ttft_p99", "error_rate", "throttle_rate")
QUANTILES = {"ttft_p50": 0.5, "ttft_p90": 0.9, "ttft_p99": 0.99}
_GATE = re.compile(r"^\s*([a-z0-9_]+)\s*(<=|<)\s*(.+?)\s*$")
_RELATIVE = re.compile(r"^old\s*(?:([*+])\s*(.+))?$")
_HINT = "write e.g. --gate 'ttft_p99<2s,error_rate<1%,ttft_p90<old*1.2' (metrics: " + ", ".join(METRICS) + ")"


@dataclass(frozen=True, slots=True)
class GroupStats:
    """What one group did during one window (deltas, not totals)."""

    requests: float = 0.0
    """Attempts sent to the group."""
    errors: float = 0.0
    throttled: float = 0.0
    ttft_s: Mapping[float, float | None] = field(default_factory=dict)
    """Quantile (0.5, 0.9, 0.99) -> seconds; None when no request produced a first byte."""

    def metric(self, name: str) -> float | None:
        if name in QUANTILES:
            return self.ttft_s.get(QUANTILES[name])
        if self.requests <= 0:
            return None
        return (self.errors if name == "error_rate" else self.throttled) / self.requests


@dataclass(frozen=True, slots=True)
class Gate:
    """``metric op bound``; the bound is ``limit``, or ``old * factor + offset`` when relative."""

    text: str
    metric: str
    op: str
    limit: float = 0.0
    relative: bool = False
    factor: float = 1.0
    offset: float = 0.0

    def bound(self, old_value: float | None) -> float | None:
        if not self.relative:
            return self.limit
        return None if old_value is None else old_value * self.factor + self.offset

    def holds(self, value: float, bound: float) -> bool:
        return value < bound if self.op == "<" else value <= bound


@dataclass(frozen=True, slots=True)
class GateResult:
    gate: str
    value: float | None
    """The new group's value; None when it could not be measured."""
    bound: float | None
    passed: bool | None
    """None: inconclusive (too little traffic on new, or on old for a relative gate)."""
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "value": self.value, "bound": self.bound, "passed": self.passed,
                "detail": self.detail}  # fmt: skip


def parse_gates(text: str) -> tuple[Gate, ...]:
    """Comma-separated gates; an empty string means none."""
    return tuple(parse_gate(p) for p in text.split(",") if p.strip())


def parse_gate(text: str) -> Gate:
    m = _GATE.match(text.lower())
    if m is None or m.group(1) not in METRICS:
        raise ConfigError(f"--gate {text.strip()!r}: expected METRIC<BOUND", hint=_HINT)
    metric, op, raw = m.groups()
    rel = _RELATIVE.match(raw)
    if rel is None:
        return Gate(text.strip(), metric, op, limit=_amount(metric, raw, text))
    how, amount = rel.groups()
    if how == "*":
        try:
            return Gate(text.strip(), metric, op, relative=True, factor=float(amount))
        except ValueError:
            raise ConfigError(f"--gate {text.strip()!r}: old*FACTOR needs a number", hint=_HINT) from None
    offset = _amount(metric, amount, text) if how == "+" else 0.0
    return Gate(text.strip(), metric, op, relative=True, offset=offset)


def _amount(metric: str, raw: str, text: str) -> float:
    raw = raw.strip()
    try:
        if metric in QUANTILES:
            return parse_duration(raw, what=f"--gate {text.strip()}")
        return float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise ConfigError(f"--gate {text.strip()!r}: cannot read the bound {raw!r}", hint=_HINT) from None


def evaluate(
    gates: tuple[Gate, ...], new: GroupStats, old: GroupStats | None, *, min_requests: float
) -> tuple[GateResult, ...]:
    """Judge every gate on one window; ``old`` is None when the old group is not measured."""
    return tuple(_judge(g, new, old, min_requests) for g in gates)


def _judge(gate: Gate, new: GroupStats, old: GroupStats | None, min_requests: float) -> GateResult:
    value = new.metric(gate.metric)
    if new.requests < min_requests or value is None:
        why = f"{gate.metric}: {new.requests:g} requests on new in the window, need {min_requests:g}"
        return GateResult(gate.text, value, None, None, why)
    old_value = old.metric(gate.metric) if old is not None and old.requests >= min_requests else None
    bound = gate.bound(old_value)
    if bound is None:
        why = f"{gate.metric}: old has too little traffic to compare with (need {min_requests:g} requests)"
        return GateResult(gate.text, value, None, None, why)
    ok = gate.holds(value, bound)
    sign = gate.op if ok else (">=" if gate.op == "<" else ">")
    vs = f" (old {show(gate.metric, old_value)})" if gate.relative else ""
    detail = f"{gate.metric} {show(gate.metric, value)} {sign} {show(gate.metric, bound)}{vs}"
    return GateResult(gate.text, value, bound, ok, detail)


def show(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric in QUANTILES:
        return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"
    return f"{value * 100:.2f}%".replace(".00%", "%")
