"""``compare(a, b)``: how run B differs from run A, metric by metric, in percent (``TTFT p50 -90.0%``).

Works on results in memory or on saved JSON (``schema_version`` 1), so ``infctl bench compare A.json B.json``
and an in-process demo share it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from infctl.bench.result import SCHEMA, SCHEMA_VERSION, BenchResult
from infctl.errors import ConfigError

# (name, path in the JSON, unit, lower is better)
METRICS: tuple[tuple[str, tuple[str, ...], str, bool], ...] = (
    ("TTFT mean", ("ttft", "mean"), "ms", True),
    ("TTFT p50", ("ttft", "p50"), "ms", True),
    ("TTFT p90", ("ttft", "p90"), "ms", True),
    ("TTFT p99", ("ttft", "p99"), "ms", True),
    ("TPOT mean", ("tpot", "mean"), "ms", True),
    ("TPOT p50", ("tpot", "p50"), "ms", True),
    ("TPOT p99", ("tpot", "p99"), "ms", True),
    ("ITL p50", ("itl", "p50"), "ms", True),
    ("ITL p99", ("itl", "p99"), "ms", True),
    ("E2E p50", ("e2e", "p50"), "ms", True),
    ("E2E p99", ("e2e", "p99"), "ms", True),
    ("requests/s", ("throughput", "requests_per_s"), "req/s", False),
    ("output tokens/s", ("throughput", "output_tokens_per_s"), "tok/s", False),
    ("total tokens/s", ("throughput", "total_tokens_per_s"), "tok/s", False),
    ("goodput", ("goodput", "requests_per_s"), "req/s", False),
    ("SLO attainment", ("goodput", "fraction"), "", False),
    ("failed requests", ("requests", "failed"), "", True),
    ("cached prompt tokens", ("tokens", "cached_fraction"), "", False),
    ("server prefix-cache hit rate", ("server", "prefix_cache_hit_rate"), "", False),
    ("server preemptions", ("server", "preemptions"), "", True),
    ("server queue peak", ("server", "queue_peak"), "", True),
)


@dataclass(frozen=True)
class Delta:
    metric: str
    unit: str
    a: float | None
    b: float | None
    delta_pct: float | None
    """(b - a) / a in percent; None when either is missing or a is 0."""
    ratio: float | None
    """b / a."""
    better: bool | None
    """B improves on A (None: equal or not comparable)."""


@dataclass(frozen=True)
class Comparison:
    a_label: str
    b_label: str
    rows: list[Delta]

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a_label, "b": self.b_label, "deltas": [asdict(r) for r in self.rows]}

    def row(self, metric: str) -> Delta:
        return next(r for r in self.rows if r.metric == metric)


def compare(a: BenchResult | Mapping[str, Any], b: BenchResult | Mapping[str, Any]) -> Comparison:
    """Deltas of every shared metric from ``a`` to ``b`` (results or their ``to_dict()`` JSON)."""
    da, db = _as_dict(a), _as_dict(b)
    rows = []
    for name, path, unit, lower in METRICS:
        x, y = _get(da, path), _get(db, path)
        if x is None and y is None:
            continue
        delta = (y - x) / x * 100.0 if x is not None and y is not None and x != 0 else None
        ratio = y / x if x is not None and y is not None and x != 0 else None
        better = None if x is None or y is None or x == y else (y < x) == lower
        rows.append(Delta(name, unit, x, y, delta, ratio, better))
    return Comparison(_label(da, "A"), _label(db, "B"), rows)


def load_result(path: str | Path) -> dict[str, Any]:
    """A saved result; ConfigError when it is not one (or from a newer schema)."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"{p}: cannot read: {e.strerror or e}", hint="check the path") from None
    except ValueError as e:
        raise ConfigError(f"{p}: not JSON ({e})", hint="pass a file written by infctl bench --save") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigError(
            f"{p}: not an infctl bench result", hint="pass a file written by infctl bench --save"
        )
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise ConfigError(
            f"{p}: schema_version {version!r} is newer than this infctl reads ({SCHEMA_VERSION})",
            hint="upgrade infctl",
        )
    return data


def _as_dict(x: BenchResult | Mapping[str, Any]) -> Mapping[str, Any]:
    return x.to_dict(timeseries=False) if isinstance(x, BenchResult) else x


def _label(d: Mapping[str, Any], default: str) -> str:
    meta = d.get("metadata")
    label = meta.get("label") if isinstance(meta, Mapping) else None
    return str(label) if label else default


def _get(d: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    cur: Any = d
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return float(cur) if isinstance(cur, int | float) and not isinstance(cur, bool) else None
