"""Fitting the simulator's step-time model to measured latencies (pure: no I/O, no clock).

The model is the one the simulated engine runs (``infctl.sim.profiles``), plus the per-request delay and the
quadratic prefill term (:class:`~infctl.sim.calib_profile.CalibratedProfile` runs it)::

    step_us = beta0 + beta1 * p + beta2 * d + attn * ctx / 1e3      (the stock model)
            + prefill_quad * sum over chunks of ((prefix + c)^2 - prefix^2) / 1e6
    TTFT    = request_overhead + request_overhead_per_ktok * L / 1e3 + the request's steps

with ``p`` prefill tokens computed in the step, ``d`` decoding sequences, ``ctx`` their summed context, and
each request's prefill chunk of ``c`` tokens after ``prefix`` already computed ones.

Two kinds of observation pin it down:

- **TTFT of one request on an idle engine**: the request's overhead plus the sum of its prefill steps. A
  prompt of ``L`` uncached tokens runs in chunks of at most ``max_num_batched_tokens``, so its regressors are
  (chunks, 1, L / 1e3, L, 0, 0, L^2 / 1e6). The per-request cost the API server adds (tokenizing, setup; and
  the client's own) lands in the two ``request_overhead`` terms, which the simulator spends *before* the
  request reaches the core, so they never stall other requests' steps. Where the engine reports its own
  prefill time (vLLM's ``request_prefill_time_seconds``), the steps are fitted to that and the overhead to the
  rest; without it, the per-token overhead cannot be told from ``beta1`` and is left at 0.
- **ITL of ``b`` concurrent streams in steady decode**: one decode step, regressors (1, 0, 0, 0, b, b * ctx,
  0).

Both are fitted at once by least squares on *relative* residuals (each row divided by its measurement), so
a 2 ms ITL weighs as much as a 200 ms TTFT: the quantity judged afterwards is relative error. Coefficients
are kept non-negative by dropping any that come out negative and refitting (the active-set idea of NNLS,
enough for six unknowns). NumPy solves when importable; otherwise the normal equations are solved by
Gaussian elimination, which is exact enough at this size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

TERMS = (
    "beta0_us",
    "request_overhead_us",
    "request_overhead_us_per_ktok",
    "beta1_us",
    "beta2_us",
    "attn_us_per_ktok",
    "prefill_quad_us_per_ktok2",
)
"""The unknowns, in column order."""
OVERHEAD_TERMS = ("request_overhead_us", "request_overhead_us_per_ktok")
"""The terms spent before a request reaches the engine core (not in any step)."""


@dataclass(frozen=True)
class TtftSample:
    """One request alone on an idle engine."""

    prompt_tokens: int
    """Prompt tokens as the engine counted them (``usage.prompt_tokens``)."""
    seconds: float
    """Request sent to first token received."""
    cached_tokens: int = 0
    """Prompt tokens served from the prefix cache (not computed)."""
    engine_prefill_s: float | None = None
    """The engine's own time from scheduling the request to its first token (vLLM's
    ``request_prefill_time_seconds``), when it reports one: its steps alone, without the API server's and
    the client's per-request costs, which are the rest of ``seconds``."""

    @property
    def overhead_s(self) -> float | None:
        """What the request spent outside the engine's steps (``seconds - engine_prefill_s``), if known."""
        if self.engine_prefill_s is None or self.seconds <= self.engine_prefill_s:
            return None
        return self.seconds - self.engine_prefill_s


@dataclass(frozen=True)
class ItlSample:
    """``batch`` streams decoding together, all of them past their first token."""

    batch: int
    """Sequences decoding in every step of the window."""
    context_tokens: float
    """Mean context (prompt + generated) of one sequence over the window, tokens."""
    seconds: float
    """Typical gap between two tokens of one stream in that window (a median: the client's over streams, or
    the engine's over the window's intervals, ``calib_counters.decode_window``)."""
    source: str = "client"
    """``engine``: the engine's own step timestamps (its ITL histogram); ``client``: arrival times."""
    pooled_seconds: float | None = None
    """``engine``: the window's plain mean gap, the host's stalls included (see ``stall_share``)."""

    @property
    def stall_share(self) -> float | None:
        """How far the host's stalls moved the engine's mean gap above ``seconds`` (0.4: +40%)."""
        return None if self.pooled_seconds is None else self.pooled_seconds / self.seconds - 1


@dataclass(frozen=True)
class FitRow:
    kind: str
    """``ttft`` or ``itl``."""
    x: float
    """Prompt tokens (ttft) or batch size (itl): what a table lists the row by."""
    measured_s: float
    predicted_s: float

    @property
    def rel_error(self) -> float:
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class StepFit:
    """Fitted coefficients (microseconds) and how well they reproduce the samples they came from."""

    coefficients: dict[str, float]
    rows: tuple[FitRow, ...]
    solver: str
    """``numpy`` or ``normal-equations``."""

    @property
    def max_rel_error(self) -> float:
        return max((abs(r.rel_error) for r in self.rows), default=0.0)

    @property
    def mean_rel_error(self) -> float:
        return sum(abs(r.rel_error) for r in self.rows) / len(self.rows) if self.rows else 0.0


def chunks(tokens: int, budget: int) -> list[int]:
    """Chunk sizes of a prefill of ``tokens`` with a step budget of ``budget`` tokens."""
    if tokens <= 0:
        return []
    full, rest = divmod(tokens, budget)
    return [budget] * full + ([rest] if rest else [])


def ttft_regressors(sample: TtftSample, budget: int) -> list[float]:
    """One lone request: its steps' fixed costs, its overhead, its tokens, and the attention its chunks do
    (which adds up to the whole prompt's square minus the cached prefix's, however it is chunked)."""
    computed = sample.prompt_tokens - min(sample.cached_tokens, sample.prompt_tokens - 1)
    cached = sample.prompt_tokens - computed
    quad = (sample.prompt_tokens**2 - cached**2) / 1e6
    steps = float(len(chunks(computed, budget)))
    return [steps, 1.0, sample.prompt_tokens / 1e3, float(computed), 0.0, 0.0, quad]


def ttft_rows(sample: TtftSample, budget: int) -> list[tuple[list[float], float]]:
    """Least-squares rows (regressors, microseconds) of one TTFT sample: one for the whole TTFT; or, when the
    engine timed its prefill, one for the engine's steps and one for the rest (the per-request overhead), so
    the step terms are fitted to the engine's own clock and the overhead alone takes what the API server and
    the client added."""
    x = ttft_regressors(sample, budget)
    overhead = sample.overhead_s
    if overhead is None or sample.engine_prefill_s is None:
        return [(x, sample.seconds * 1e6)]
    steps = [0.0 if t in OVERHEAD_TERMS else v for t, v in zip(TERMS, x, strict=True)]
    alone = [v if t in OVERHEAD_TERMS else 0.0 for t, v in zip(TERMS, x, strict=True)]
    return [(steps, sample.engine_prefill_s * 1e6), (alone, overhead * 1e6)]


def itl_regressors(sample: ItlSample) -> list[float]:
    return [1.0, 0.0, 0.0, 0.0, float(sample.batch), sample.batch * sample.context_tokens / 1e3, 0.0]


def predict_us(coefficients: dict[str, float], regressors: Sequence[float]) -> float:
    return sum(coefficients.get(t, 0.0) * x for t, x in zip(TERMS, regressors, strict=True))


def fit_step_model(
    ttft: Sequence[TtftSample],
    itl: Sequence[ItlSample],
    *,
    max_num_batched_tokens: int,
    terms: Sequence[str] | None = None,
    trim_above: float | None = None,
) -> StepFit:
    """Least-squares coefficients (µs, all >= 0) of ``terms``; the others are fixed at 0.

    ``terms`` None: all of :data:`TERMS`, but ``request_overhead_us_per_ktok`` only when some TTFT sample has
    the engine's prefill time (else it is the same column as ``beta1_us``).

    ``trim_above`` (e.g. 0.3): refit once without the rows measured more than that fraction above the first
    fit (at most one row in six, the furthest first). Other work on a shared machine only ever adds latency,
    so a point far above the rest is a burst of that work, not the engine; left in, one such point drags
    every term. ``StepFit.rows`` still lists every sample.

    Raises ValueError when the samples cannot determine the terms (too few, or all of one kind when both
    ``beta0_us`` and ``request_overhead_us`` are asked for).
    """
    if terms is None:
        split = any(s.overhead_s is not None for s in ttft)
        terms = [t for t in TERMS if split or t != "request_overhead_us_per_ktok"]
    unknown = set(terms) - set(TERMS)
    if unknown:
        raise ValueError(f"unknown terms: {', '.join(sorted(unknown))}")
    rows = [row for s in ttft for row in ttft_rows(s, max_num_batched_tokens)]
    rows += [(itl_regressors(s), s.seconds * 1e6) for s in itl]
    if any(y <= 0 for _, y in rows):
        raise ValueError("every measured latency must be > 0")
    active = [TERMS.index(t) for t in TERMS if t in terms]
    coef, solver = _nonnegative_fit(rows, active)
    if trim_above is not None:
        above = sorted(
            ((y / p, i) for i, (x, y) in enumerate(rows) if (p := predict_us(coef, x)) > 0),
            reverse=True,
        )
        drop = {i for ratio, i in above[: len(rows) // 6] if ratio > 1 + trim_above}
        if drop:
            with contextlib.suppress(ValueError):  # the rest cannot pin every term: keep the first fit
                coef, solver = _nonnegative_fit([r for i, r in enumerate(rows) if i not in drop], active)
    fit_rows = [
        FitRow(
            "ttft",
            s.prompt_tokens,
            s.seconds,
            predict_us(coef, ttft_regressors(s, max_num_batched_tokens)) * 1e-6,
        )
        for s in ttft
    ]
    fit_rows += [FitRow("itl", s.batch, s.seconds, predict_us(coef, itl_regressors(s)) * 1e-6) for s in itl]
    return StepFit(coefficients=coef, rows=tuple(fit_rows), solver=solver)


def _nonnegative_fit(
    rows: Sequence[tuple[list[float], float]], active: list[int]
) -> tuple[dict[str, float], str]:
    """Relative least squares over the ``active`` columns, dropping any that come out negative."""
    active = list(active)
    solver = "normal-equations"
    coef: dict[str, float] = dict.fromkeys(TERMS, 0.0)
    while active:
        design = [[x[i] / y for i in active] for x, y in rows]
        if len(design) < len(active):
            raise ValueError(f"{len(design)} samples cannot determine {len(active)} coefficients")
        solution, solver = _lstsq(design, [1.0] * len(design))
        negative = [i for i, v in zip(active, solution, strict=True) if v < 0]
        if not negative:
            coef.update({TERMS[i]: v for i, v in zip(active, solution, strict=True)})
            break
        # Drop the most negative one and refit: a term the data says costs < 0 costs nothing measurable.
        worst = min(negative, key=lambda i: solution[active.index(i)])
        active.remove(worst)
    return coef, solver


def _lstsq(a: list[list[float]], b: list[float]) -> tuple[list[float], str]:
    try:
        import numpy as np
    except ImportError:
        return solve_normal_equations(a, b), "normal-equations"
    matrix = np.asarray(a, dtype=float)
    rank = int(np.linalg.matrix_rank(matrix))
    if rank < matrix.shape[1]:
        raise ValueError(f"the samples determine only {rank} of {matrix.shape[1]} coefficients")
    solution = np.linalg.lstsq(matrix, np.asarray(b, dtype=float), rcond=None)[0]
    return [float(v) for v in solution], "numpy"


def solve_normal_equations(a: Sequence[Sequence[float]], b: Sequence[float]) -> list[float]:
    """argmin |a x - b|^2 through (a^T a) x = a^T b, by Gaussian elimination with partial pivoting."""
    n = len(a[0])
    ata = [[sum(row[i] * row[j] for row in a) for j in range(n)] for i in range(n)]
    atb = [sum(row[i] * y for row, y in zip(a, b, strict=True)) for i in range(n)]
    m = [[*ata[i], atb[i]] for i in range(n)]
    scale = max((abs(v) for row in ata for v in row), default=0.0) or 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) <= 1e-12 * scale:
            raise ValueError(f"the samples determine only {col} of {n} coefficients")
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                factor = m[r][col] / m[col][col]
                m[r] = [v - factor * p for v, p in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]
