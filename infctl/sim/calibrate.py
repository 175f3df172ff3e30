"""``infctl sim calibrate``: measure a live engine, fit the simulator's step-time model, make a profile.

Three parts, kept apart so the fitting is testable without an engine:

- :mod:`infctl.sim.calib_measure` (I/O): TTFT of lone requests against prompt length (with the engine's
  own prefill time of each where it reports one: the steps, apart from the API server's per-request
  overhead, which the simulator spends before a request reaches its core); ITL of ``b``
  concurrent streams against ``b`` (at two context lengths, so the attention term is seen), from the engine's
  own step timestamps where it exposes them (:mod:`infctl.sim.calib_counters`), else from the client's.
- :mod:`infctl.sim.calib_fit` (pure): least squares over both kinds of sample at once.
- :mod:`infctl.sim.calib_profile`: the :class:`CalibratedProfile` the simulated engine runs, and its file.

The engine's limits come from the engine where it reports them (vLLM: ``/v1/models`` ``max_model_len``;
``vllm:cache_config_info`` ``block_size``, ``num_gpu_blocks``, KV bytes per token); the scheduler limits it
does not report (``max_num_seqs``, ``max_num_batched_tokens``) are settings whose defaults are vLLM's on CPU.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from infctl.errors import ConfigError
from infctl.sim.calib_fit import ItlSample, StepFit, TtftSample, fit_step_model
from infctl.sim.calib_loop import corrected, simulated_engine, with_coefficients
from infctl.sim.calib_measure import (
    EngineClient,
    EngineInfo,
    engine_info,
    make_session,
    measure_itl,
    measure_ttft,
    prompt_words,
)
from infctl.sim.calib_profile import CalibratedProfile

Progress = Callable[[str], None]
Between = Callable[[int], Awaitable[None]]
"""Called with the round's index after each round of measurements."""


@dataclass(frozen=True)
class CalibrationSettings:
    """What to measure and how. Lengths are in tokens, times in seconds."""

    url: str
    """Base URL of the engine, e.g. ``http://127.0.0.1:8000``."""
    model: str | None = None
    """Served model name; None: the first one ``/v1/models`` lists."""
    name: str = "calibrated"
    """Name of the profile written."""
    prompt_lengths: tuple[int, ...] = (16, 128, 384, 768, 1280, 2048)
    """Prompt lengths whose TTFT is measured (one lone request at a time)."""
    ttft_repeats: int = 7
    """Requests per prompt length; the fit uses each length's median."""
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 24)
    """Concurrent streams whose ITL is measured."""
    itl_contexts: tuple[int, ...] = (32, 1024)
    """Prompt lengths of the ITL streams (two or more let the fit see the attention term)."""
    itl_output_tokens: int = 160
    """Tokens each ITL stream generates (the engine-timed window is about the first 3/4 of them, after
    every stream's first two; on a loaded machine the client can stall for a few hundred milliseconds, and
    shorter runs then leave no window)."""
    itl_repeats: int = 3
    """Runs per (batch, context); the fit uses their median."""
    warmup_requests: int = 4
    """Requests sent first and thrown away (first-use compilation, allocator warm-up)."""
    max_num_batched_tokens: int = 2048
    """The engine's step token budget (vLLM's default on CPU: 2048; on GPU: 8192 or 2048)."""
    max_num_seqs: int = 128
    """The engine's batch limit (vLLM's default on CPU: 128; on GPU: 256 or 1024)."""
    kv_bytes_per_token: int = 131_072
    """KV bytes per token when the engine does not report it (Llama-3-8B BF16: 128 KiB)."""
    kv_transfer_gbps: float = 25.0
    """PD transfer bandwidth written into the profile (not measured), GB/s."""
    seed: int | None = None
    """Salt of the random prompts; None: a new one per run, so that an engine calibrated before never
    serves them from its prefix cache (the fit would see cached tokens as free)."""
    timeout_s: float = 300.0
    """Limit of one request."""
    quantile: float = 0.5
    """Which quantile of a point's repeats stands for it: 0.5, the median; lower (0.25) reads the engine when
    it had the CPU, on a machine whose other work comes and goes (other work only ever adds latency)."""
    trim_above: float | None = 0.3
    """Refit without the points measured more than this fraction above the first fit (at most one in six):
    bursts of other work on a shared machine (see ``infctl.sim.calib_fit.fit_step_model``); None: keep all."""
    compensate: bool = True
    """Serve the fit from a simulated engine, measure it the same way, and correct each coefficient by the
    difference (cancels the simulator's and the client's own latency; see ``infctl.sim.calib_loop``)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.quantile <= 1.0:
            raise ConfigError(f"calibration quantile must be within 0..1, got {self.quantile}")
        if self.trim_above is not None and self.trim_above <= 0:
            raise ConfigError(f"calibration trim_above must be > 0 (or None), got {self.trim_above}")


@dataclass(frozen=True)
class Calibration:
    """The measured samples, the fit and the profile made from it."""

    info: EngineInfo
    ttft: tuple[TtftSample, ...]
    """Per-length medians (what was fitted)."""
    itl: tuple[ItlSample, ...]
    fit: StepFit
    profile: CalibratedProfile
    seconds: float
    """Wall time the measurement took."""
    served: StepFit | None = None
    """The fit of the simulator serving ``fit`` (None without ``compensate``); the profile's coefficients
    are ``fit``'s corrected by the difference."""

    def metadata(self, settings: CalibrationSettings) -> dict[str, Any]:
        """The ``calibration`` section of the profile file: provenance and in-sample residuals."""
        return {
            "url": settings.url,
            "model": self.info.model,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "measure_seconds": round(self.seconds, 1),
            "solver": self.fit.solver,
            "fitted_us": {k: round(v, 3) for k, v in self.fit.coefficients.items()},
            "served_fit_us": None
            if self.served is None
            else {k: round(v, 3) for k, v in self.served.coefficients.items()},
            "itl_source": sorted({s.source for s in self.itl}),
            "max_rel_error": round(self.fit.max_rel_error, 4),
            "mean_rel_error": round(self.fit.mean_rel_error, 4),
            "samples": [
                {
                    "kind": r.kind,
                    "x": r.x,
                    "measured_ms": round(r.measured_s * 1e3, 3),
                    "predicted_ms": round(r.predicted_s * 1e3, 3),
                }
                for r in self.fit.rows
            ],
            "settings": {k: v for k, v in asdict(settings).items() if k not in ("url", "model", "name")},
        }


async def calibrate(
    settings: CalibrationSettings,
    *,
    session: aiohttp.ClientSession | None = None,
    progress: Progress | None = None,
    between: Between | None = None,
) -> Calibration:
    """Measure the engine at ``settings.url`` and fit a profile to it (under a minute on the tiny CPU model);
    with ``settings.compensate``, also measure the simulator serving that fit and correct for it.
    ``between(r)`` runs after each round of the engine's measurement (see :func:`measure`)."""
    say = progress or (lambda _: None)
    own = session is None
    sess = session or make_session()
    started = time.perf_counter()
    try:
        info = await engine_info(sess, settings.url, settings.model)
        say(f"measuring {info.model} at {settings.url}")
        seed = settings.seed if settings.seed is not None else secrets.randbits(40)
        client = EngineClient(sess, settings.url, info.model, timeout_s=settings.timeout_s)
        ttft, itl = await measure(client, settings, seed, say, between=between)
        fit = fit_step_model(
            ttft, itl, max_num_batched_tokens=settings.max_num_batched_tokens, trim_above=settings.trim_above
        )
        profile = build_profile(settings, info, fit)
        served: StepFit | None = None
        if settings.compensate:
            # The simulator's ITL histogram is stamped with its step model's times, so engine-timed ITL needs
            # no correction: its served samples are the model's own figures, and only TTFT is measured.
            engine_timed = bool(itl) and all(s.source == "engine" for s in itl)
            async with simulated_engine(profile, sess) as url:
                say(f"measuring the simulator serving that fit at {url}")
                sim_ttft, sim_itl = await measure(
                    EngineClient(sess, url, info.model), settings, seed, say, itl=not engine_timed
                )
            if engine_timed:
                sim_itl = [modelled_itl(profile, s) for s in itl]
            served = fit_step_model(
                sim_ttft,
                sim_itl,
                max_num_batched_tokens=settings.max_num_batched_tokens,
                trim_above=settings.trim_above,
            )
            profile = with_coefficients(profile, corrected(fit, served))
    finally:
        if own:
            await sess.close()
    return Calibration(info, tuple(ttft), tuple(itl), fit, profile, time.perf_counter() - started, served)


def modelled_itl(profile: CalibratedProfile, sample: ItlSample) -> ItlSample:
    """What ``profile``'s step model says ``sample``'s decode steps take."""
    step = profile.step_time(0, sample.batch, round(sample.batch * sample.context_tokens))
    return ItlSample(sample.batch, sample.context_tokens, step, "engine")


async def measure(
    client: EngineClient,
    settings: CalibrationSettings,
    seed: int,
    say: Progress,
    *,
    itl: bool = True,
    between: Between | None = None,
) -> tuple[list[TtftSample], list[ItlSample]]:
    """Warm-up, then rounds of one TTFT request per prompt length and (with ``itl``, while ITL repeats are
    left) one ITL run per (context, batch); each point's ``settings.quantile`` over its rounds. Repeats are
    the outer loop, so a burst of outside load spreads over many points instead of spoiling every run of one;
    ``between(r)`` runs after round ``r`` (a benchmark measures its held-out workloads there, so that load
    falls on them and on the fitted points alike)."""
    for i in range(settings.warmup_requests):
        await client.stream(prompt_words(16, seed - 1 - i), 8)
    itl_rounds = settings.itl_repeats if itl else 0
    say(f"TTFT: {len(settings.prompt_lengths)} prompt lengths x {settings.ttft_repeats}")
    if itl_rounds:
        say(f"ITL: batches {', '.join(map(str, settings.batch_sizes))} at contexts {settings.itl_contexts}")
    raw: list[TtftSample] = []
    runs: dict[tuple[int, int], list[ItlSample]] = {}
    for r in range(max(settings.ttft_repeats, itl_rounds)):
        if r < settings.ttft_repeats:
            raw += await measure_ttft(client, settings.prompt_lengths, repeats=1, seed=seed, first_repeat=r)
        for context in settings.itl_contexts if r < itl_rounds else ():
            for batch in settings.batch_sizes:
                sample = await measure_itl(
                    client,
                    batch,
                    context,
                    settings.itl_output_tokens,
                    seed=seed + 7919 * r + 31 * batch + context,
                )
                if sample is not None:
                    runs.setdefault((context, batch), []).append(sample)
        if between is not None:
            await between(r)
    points = [s for key in sorted(runs) for s in median_itl(runs[key], settings.quantile)]
    return median_ttft(raw, settings.quantile), points


def median_ttft(samples: list[TtftSample], q: float = 0.5) -> list[TtftSample]:
    """One sample per prompt length: the ``q`` quantile of its times (the median: robust to a stray slow
    request), and of the engine's prefill times when every request has one."""
    by_length: dict[int, list[TtftSample]] = {}
    for s in samples:
        by_length.setdefault(s.prompt_tokens, []).append(s)
    out = []
    for length, group in sorted(by_length.items()):
        cached = min(s.cached_tokens for s in group)
        engine = [s.engine_prefill_s for s in group if s.engine_prefill_s is not None]
        prefill = quantile(engine, q) if len(engine) == len(group) else None
        out.append(TtftSample(length, quantile([s.seconds for s in group], q), cached, prefill))
    return out


def median_itl(runs: list[ItlSample], q: float = 0.5) -> list[ItlSample]:
    """One sample per (context, batch): the ``q`` quantile of its runs, taken over the runs timed by the
    engine's own clock when there are any (client-timed runs are then left out, not mixed in)."""
    engine = [r for r in runs if r.source == "engine"]
    runs = engine or runs
    if not runs:
        return []
    ctx = sum(r.context_tokens for r in runs) / len(runs)
    return [ItlSample(runs[0].batch, ctx, quantile([r.seconds for r in runs], q), runs[0].source)]


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, interpolated between order statistics (0.5: the median)."""
    if not values:
        raise ValueError("quantile of no values")
    ordered = sorted(values)
    pos = min(max(q, 0.0), 1.0) * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def build_profile(settings: CalibrationSettings, info: EngineInfo, fit: StepFit) -> CalibratedProfile:
    c = fit.coefficients
    max_model_len = info.max_model_len or max(4096, *settings.prompt_lengths)
    block_size = info.block_size or 16
    blocks = info.num_gpu_blocks or -(-max_model_len * settings.max_num_seqs // block_size)
    return CalibratedProfile(
        name=settings.name,
        description=f"fitted to {info.model} at {settings.url} by infctl sim calibrate",
        beta0_us=c["beta0_us"],
        beta1_us=c["beta1_us"],
        beta2_us=c["beta2_us"],
        attn_us_per_ktok=c["attn_us_per_ktok"],
        request_overhead_us=c["request_overhead_us"],
        request_overhead_us_per_ktok=c["request_overhead_us_per_ktok"],
        prefill_quad_us_per_ktok2=c["prefill_quad_us_per_ktok2"],
        num_gpu_blocks=blocks,
        block_size=block_size,
        max_num_seqs=settings.max_num_seqs,
        max_num_batched_tokens=max(settings.max_num_batched_tokens, settings.max_num_seqs),
        max_model_len=max_model_len,
        kv_bytes_per_token=info.kv_bytes_per_token or settings.kv_bytes_per_token,
        kv_transfer_gbps=settings.kv_transfer_gbps,
        model=info.model,
        enable_prefix_caching=True if info.prefix_caching is None else info.prefix_caching,
    )
