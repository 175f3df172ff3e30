"""A fast parser for the Prometheus text exposition format (version 0.0.4), as vLLM and SGLang serve it.

Speed matters here: a router scrapes every engine every 50-100 ms, and a vLLM ``/metrics`` payload is
40-100 KB, most of it histogram buckets nobody on the hot path reads. ``parse_metrics(text, wanted)``
therefore never splits or inspects an unwanted line: one compiled regular expression, anchored on a
newline followed by one of the wanted names, walks the payload in C and yields only the wanted samples.

Names in ``wanted`` select sample names exactly; a histogram or summary family name (no suffix) also
selects its ``_bucket``, ``_sum`` and ``_count`` samples. Timestamps are accepted and dropped. Label
values are unescaped (``\\\\``, ``\\"``, ``\\n``). A sample line that cannot be parsed raises
:class:`~infctl.errors.MetricsError` naming the line; comments, ``# HELP``/``# TYPE`` and blank lines
are skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache
from typing import NamedTuple

from infctl.errors import MetricsError

__all__ = [
    "MetricFamilies",
    "Sample",
    "histogram_buckets",
    "histogram_quantile",
    "label_values",
    "mean_value",
    "parse_metrics",
    "value",
]


class Sample(NamedTuple):
    """One sample line: its labels and value (a timestamp, if any, is dropped)."""

    labels: dict[str, str]
    value: float


MetricFamilies = dict[str, list[Sample]]
"""Sample name (``vllm:num_requests_waiting``, ``..._bucket``) -> samples in payload order."""

HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# A label value's body as an unrolled loop: one fast character-class run between escapes.
_VALUE_BODY = r'[^"\\\n]*(?:\\.[^"\\\n]*)*'
_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*[ \t]*=[ \t]*"' + _VALUE_BODY + '"'
# Each pair must be followed by a comma or the closing brace, so a '}' or ',' inside a quoted value
# cannot end the label block early, and garbage between pairs fails the line instead of vanishing.
_LABELS = r"\{[ \t]*((?:" + _PAIR + r"[ \t]*(?:,[ \t]*|(?=\})))*)\}"
_TAIL = r"[ \t]*(?:" + _LABELS + r")?[ \t]+([^ \t\r\n]+)(?:[ \t]+-?[0-9]+)?[ \t]*\r?(?=\n|$)"
# Groups: 1 name, 2 label block, 3 value; 4 set = a wanted line that is malformed.
_BAD_TAIL = r"|([^\n]*))"
# Unfiltered: every line that is not a comment or blank; group 5 = a line that starts with garbage.
_ANY_LINE_RE = re.compile(r"\n[ \t]*(?:(" + _NAME + r")(?:" + _TAIL + _BAD_TAIL + r"|([^#\s][^\n]*))")
_PAIR_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"(' + _VALUE_BODY + ')"')
_ESCAPE_RE = re.compile(r"\\(.)")
_UNESCAPE = {"n": "\n", "\\": "\\", '"': '"'}


def parse_metrics(text: str, wanted: Collection[str] | None = None) -> MetricFamilies:
    """Parse a /metrics payload into samples by name, keeping only ``wanted`` names when given."""
    families: MetricFamilies = {}
    if wanted is not None and not wanted:
        return families
    finder = _ANY_LINE_RE if wanted is None else _compile_filter(frozenset(wanted))
    parse_labels = _parse_labels
    # Both patterns anchor on "\n" (a literal the regex engine scans for quickly), so the first line
    # needs one before it too; m.start() is then the line's own offset in ``text``.
    for m in finder.finditer("\n" + text):
        name, block, raw, bad = m.group(1, 2, 3, 4)
        try:
            if name is None or bad is not None:
                raise ValueError
            sample = Sample(parse_labels(block) if block else {}, float(raw))
        except ValueError:
            raise _line_error(text, m.start(), m.group(0)[1:]) from None
        samples = families.get(name)
        if samples is None:
            families[name] = [sample]
        else:
            samples.append(sample)
    return families


def _parse_labels(block: str) -> dict[str, str]:
    pairs = _PAIR_RE.findall(block)
    if "\\" not in block:
        return dict(pairs)
    return {k: _ESCAPE_RE.sub(_unescape_one, v) if "\\" in v else v for k, v in pairs}


def _unescape_one(m: re.Match[str]) -> str:
    c = m.group(1)
    # Unknown escapes are kept verbatim: lenient, and round-trips what the engine meant.
    return _UNESCAPE.get(c, "\\" + c)


@lru_cache(maxsize=64)
def _compile_filter(wanted: frozenset[str]) -> re.Pattern[str]:
    names = sorted(wanted, key=lambda n: (-len(n), n))
    prefix = _common_prefix(names)
    # Factoring the shared prefix ("vllm:") out of the alternation gives the regex engine a literal
    # to scan for, so it skips unwanted lines without trying every alternative at every newline.
    alternatives = "|".join(re.escape(n[len(prefix) :]) for n in names)
    suffixes = "|".join(HISTOGRAM_SUFFIXES)
    head = r"\n(" + re.escape(prefix) + r"(?:" + alternatives + r")(?:" + suffixes + r")?)(?=[ \t{])"
    return re.compile(head + r"(?:" + _TAIL + _BAD_TAIL)


def _common_prefix(names: list[str]) -> str:
    if not names:
        return ""
    lo, hi = min(names), max(names)
    i = 0
    while i < len(lo) and i < len(hi) and lo[i] == hi[i]:
        i += 1
    return lo[:i]


def _line_error(text: str, pos: int, line: str) -> MetricsError:
    lineno = text.count("\n", 0, pos) + 1
    return MetricsError(
        f"/metrics line {lineno} is not a Prometheus sample: {line[:120]!r}",
        hint="check that the URL serves Prometheus text format (an engine's /metrics, not a proxy page)",
    )


def value(families: Mapping[str, list[Sample]], name: str, default: float = 0.0) -> float:
    """Sum of ``name``'s samples over all label sets (NaN samples ignored); ``default`` when absent."""
    samples = families.get(name)
    if not samples:
        return default
    total = 0.0
    seen = False
    for s in samples:
        if s.value == s.value:  # not NaN
            total += s.value
            seen = True
    return total if seen else default


def mean_value(families: Mapping[str, list[Sample]], name: str, default: float = 0.0) -> float:
    """Mean of ``name``'s samples (a usage fraction over data-parallel engines); ``default`` when absent."""
    vals = [s.value for s in families.get(name, ()) if s.value == s.value]
    return sum(vals) / len(vals) if vals else default


def label_values(families: Mapping[str, list[Sample]], names: Iterable[str], label: str) -> tuple[str, ...]:
    """Sorted distinct values of ``label`` over the samples of ``names``."""
    seen = {s.labels[label] for n in names for s in families.get(n, ()) if label in s.labels}
    return tuple(sorted(seen))


def histogram_buckets(
    families: Mapping[str, list[Sample]], family: str, match: Mapping[str, str] | None = None
) -> list[tuple[float, float]]:
    """Cumulative ``(upper_bound, count)`` pairs of ``family``, summed over series matching ``match``."""
    counts: dict[float, float] = {}
    for s in families.get(family + "_bucket", ()):
        if match and any(s.labels.get(k) != v for k, v in match.items()):
            continue
        le = s.labels.get("le")
        if le is None:
            continue
        bound = float(le)
        counts[bound] = counts.get(bound, 0.0) + s.value
    return sorted(counts.items())


def histogram_quantile(
    q: float, families: Mapping[str, list[Sample]], family: str, match: Mapping[str, str] | None = None
) -> float | None:
    """The ``q`` quantile of a histogram, interpolated within buckets as PromQL does.

    None without observations. A quantile falling in the ``+Inf`` bucket returns the highest finite
    bound (the histogram cannot say more).
    """
    buckets = histogram_buckets(families, family, match)
    if not buckets or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = min(max(q, 0.0), 1.0) * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound
