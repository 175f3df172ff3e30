"""A small Prometheus text-format (0.0.4) writer, fast enough to be scraped every 100 ms.

Histograms keep per-bucket (non-cumulative) counts and are rendered cumulatively with ``+Inf``,
``_sum`` and ``_count``, as prometheus_client does; numbers are formatted like prometheus_client
(``1.0``, ``1e+06``) so parsers that compare label values as text see the same strings.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def go_float(value: float) -> str:
    """Format like Go / prometheus_client: ``1.0``, ``0.25``, ``+Inf``, ``1e+06``."""
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if value != value:
        return "NaN"
    text = repr(float(value))
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def label_pairs(labels: Mapping[str, str]) -> str:
    """``a="1",b="2"``: a label set as the Writer takes it (without braces)."""
    return ",".join(f'{k}="{escape(str(v))}"' for k, v in labels.items())


class Histogram:
    """Observations against fixed upper bounds (seconds or tokens)."""

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float, n: int = 1) -> None:
        self.counts[bisect_left(self.bounds, value)] += n
        self.total += value * n
        self.count += n


class Writer:
    """Accumulates exposition lines; ``labels`` is a pre-rendered label set without braces."""

    __slots__ = ("_bucket_prefixes", "lines")

    def __init__(self, bucket_prefixes: dict[tuple[str, str, tuple[float, ...]], list[str]]) -> None:
        self.lines: list[str] = []
        # Bucket sample prefixes never change for a (name, labels, bounds): cached across renders.
        self._bucket_prefixes = bucket_prefixes

    def header(self, name: str, kind: str, help_: str) -> None:
        self.lines.append(f"# HELP {name} {help_}\n# TYPE {name} {kind}")

    def sample(self, name: str, labels: str, value: float) -> None:
        self.lines.append(f"{name}{{{labels}}} {go_float(value)}" if labels else f"{name} {go_float(value)}")

    def gauge(self, name: str, help_: str, labels: str, value: float) -> None:
        self.header(name, "gauge", help_)
        self.sample(name, labels, value)

    def counter(self, sample: str, help_: str, labels: str, value: float) -> None:
        """``sample`` ends in ``_total``; HELP and TYPE name it too, as prometheus_client writes 0.0.4."""
        self.header(sample, "counter", help_)
        self.sample(sample, labels, value)

    def counters(self, sample: str, help_: str, samples: Iterable[tuple[str, float]]) -> None:
        self.header(sample, "counter", help_)
        for labels, value in samples:
            self.sample(sample, labels, value)

    def histogram(self, name: str, help_: str, labels: str, hist: Histogram) -> None:
        self.header(name, "histogram", help_)
        self.histogram_samples(name, labels, hist)

    def histogram_samples(self, name: str, labels: str, hist: Histogram) -> None:
        """One label set's buckets, sum and count (the family's header written once by the caller)."""
        key = (name, labels, hist.bounds)
        prefixes = self._bucket_prefixes.get(key)
        if prefixes is None:
            sep = "," if labels else ""
            prefixes = [f'{name}_bucket{{{labels}{sep}le="{go_float(b)}"}} ' for b in hist.bounds]
            prefixes.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} ')
            self._bucket_prefixes[key] = prefixes
        running = 0
        out = self.lines
        for prefix, c in zip(prefixes, hist.counts, strict=True):
            running += c
            out.append(f"{prefix}{running}.0")
        self.sample(f"{name}_sum", labels, hist.total)
        self.sample(f"{name}_count", labels, hist.count)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def buckets_1_2_5(maximum: int) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to ``maximum`` (vLLM's token-count buckets)."""
    out: list[float] = []
    exp = 1
    while True:
        for m in (1, 2, 5):
            v = m * exp
            if v > maximum:
                return tuple(out)
            out.append(float(v))
        exp *= 10
