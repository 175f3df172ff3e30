"""``infctl sim calibrate`` without a real engine: the pure fit, the profile file, and a round trip against
the simulated engine (whose step-time model is known, so the fit must recover it). Fast; not marked slow.

(They sit here beside the real-engine tests they support; tests/unit/sim would suit the pure ones too.)
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app
from infctl.errors import ConfigError
from infctl.sim.calib_fit import (
    TERMS,
    ItlSample,
    TtftSample,
    chunks,
    fit_step_model,
    itl_regressors,
    predict_us,
    solve_normal_equations,
    ttft_regressors,
)
from infctl.sim.calib_loop import free_port
from infctl.sim.calib_profile import (
    CalibratedProfile,
    load_profile_file,
    profile_from_dict,
    write_profile_file,
)
from infctl.sim.calibrate import CalibrationSettings, calibrate
from infctl.sim.profiles import TINY_CPU, get_profile

TRUE = {
    "beta0_us": 2500.0,
    "request_overhead_us": 6000.0,
    "request_overhead_us_per_ktok": 0.0,
    "beta1_us": 20.0,
    "beta2_us": 150.0,
    "attn_us_per_ktok": 300.0,
    "prefill_quad_us_per_ktok2": 12000.0,
}


def synthetic(coef: dict[str, float]) -> tuple[list[TtftSample], list[ItlSample]]:
    ttft = [TtftSample(n, 0.0) for n in (16, 128, 512, 1024, 2048, 3000)]
    itl = [ItlSample(b, c, 0.0) for b in (1, 4, 16, 32) for c in (64.0, 1024.0)]
    ttft = [TtftSample(s.prompt_tokens, predict_us(coef, ttft_regressors(s, 2048)) * 1e-6) for s in ttft]
    itl = [ItlSample(s.batch, s.context_tokens, predict_us(coef, itl_regressors(s)) * 1e-6) for s in itl]
    return ttft, itl


def test_chunks_follow_the_step_budget() -> None:
    assert chunks(3000, 2048) == [2048, 952]
    assert chunks(2048, 2048) == [2048]
    assert chunks(0, 2048) == []


def test_fit_recovers_exact_coefficients() -> None:
    ttft, itl = synthetic(TRUE)
    fit = fit_step_model(ttft, itl, max_num_batched_tokens=2048)
    for term in TERMS:
        assert fit.coefficients[term] == pytest.approx(TRUE[term], rel=1e-6)
    assert fit.max_rel_error < 1e-9


def test_normal_equations_agree_with_numpy() -> None:
    pytest.importorskip("numpy")
    ttft, itl = synthetic(TRUE)
    rows = [ttft_regressors(s, 2048) for s in ttft] + [itl_regressors(s) for s in itl]
    ys = [s.seconds * 1e6 for s in ttft] + [s.seconds * 1e6 for s in itl]
    # Client-timed TTFT alone cannot tell the per-token overhead from beta1: leave its column out.
    keep = [i for i, t in enumerate(TERMS) if t != "request_overhead_us_per_ktok"]
    design = [[row[i] / y for i in keep] for row, y in zip(rows, ys, strict=True)]
    solution = solve_normal_equations(design, [1.0] * len(ys))
    assert solution == pytest.approx([TRUE[TERMS[i]] for i in keep], rel=1e-6)


def test_a_term_the_data_calls_negative_is_dropped() -> None:
    coef = {**TRUE, "attn_us_per_ktok": 0.0}
    ttft, itl = synthetic(coef)
    # ITL shrinking with context would need attn < 0: clamp it to 0 and fit the rest.
    itl = [
        ItlSample(s.batch, s.context_tokens, s.seconds * (0.97 if s.context_tokens > 100 else 1.0))
        for s in itl
    ]
    fit = fit_step_model(ttft, itl, max_num_batched_tokens=2048)
    assert fit.coefficients["attn_us_per_ktok"] == 0.0
    assert all(v >= 0 for v in fit.coefficients.values())


def test_a_point_far_above_the_fit_is_trimmed() -> None:
    ttft, itl = synthetic(TRUE)
    # One ITL point caught in a burst of outside load: twice the engine's step time.
    burst = [
        ItlSample(s.batch, s.context_tokens, s.seconds * (2.0 if i == 3 else 1.0)) for i, s in enumerate(itl)
    ]
    kept = fit_step_model(ttft, burst, max_num_batched_tokens=2048)
    trimmed = fit_step_model(ttft, burst, max_num_batched_tokens=2048, trim_above=0.3)
    assert kept.coefficients["beta2_us"] != pytest.approx(TRUE["beta2_us"], rel=0.05)
    for term in ("beta0_us", "beta2_us", "attn_us_per_ktok", "beta1_us"):
        assert trimmed.coefficients[term] == pytest.approx(TRUE[term], rel=1e-6)
    # The rows still list every sample, the trimmed one with its miss.
    assert len(trimmed.rows) == len(ttft) + len(itl)
    assert min(r.rel_error for r in trimmed.rows if r.kind == "itl") == pytest.approx(-0.5)
    # Points merely noisy (within the margin) stay in.
    mild = [
        ItlSample(s.batch, s.context_tokens, s.seconds * (1.2 if i == 3 else 1.0)) for i, s in enumerate(itl)
    ]
    assert fit_step_model(ttft, mild, max_num_batched_tokens=2048, trim_above=0.3).coefficients == (
        fit_step_model(ttft, mild, max_num_batched_tokens=2048).coefficients
    )


def test_too_few_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="determine"):
        fit_step_model([TtftSample(16, 0.01)], [], max_num_batched_tokens=2048)


def test_engine_timed_prefill_splits_the_overhead_from_the_steps() -> None:
    ttft, itl = synthetic(TRUE)
    # The engine times its own steps; the client sees them plus the overhead, and noise on top of that
    # (client-side only: the step terms must not move).
    steps_only = {**TRUE, "request_overhead_us": 0.0}
    per_token = 3000.0  # us per 1,000 prompt tokens: tokenizing
    timed = [
        TtftSample(
            s.prompt_tokens,
            s.seconds + per_token * s.prompt_tokens * 1e-9,
            engine_prefill_s=predict_us(steps_only, ttft_regressors(s, 2048)) * 1e-6,
        )
        for s in ttft
    ]
    fit = fit_step_model(timed, itl, max_num_batched_tokens=2048)
    for term in ("beta0_us", "beta1_us", "beta2_us", "attn_us_per_ktok", "prefill_quad_us_per_ktok2"):
        assert fit.coefficients[term] == pytest.approx(TRUE[term], rel=1e-6)
    assert fit.coefficients["request_overhead_us"] == pytest.approx(TRUE["request_overhead_us"], rel=1e-6)
    assert fit.coefficients["request_overhead_us_per_ktok"] == pytest.approx(per_token, rel=1e-6)
    # Noise on the client's side moves the overhead only, never the engine's step terms.
    noisy = [dataclasses.replace(s, seconds=s.seconds * 1.3) if s.prompt_tokens == 512 else s for s in timed]
    fit = fit_step_model(noisy, itl, max_num_batched_tokens=2048)
    assert fit.coefficients["beta1_us"] == pytest.approx(TRUE["beta1_us"], rel=1e-6)
    assert fit.coefficients["request_overhead_us"] > TRUE["request_overhead_us"]


def test_calibrated_profile_step_time_and_ttft() -> None:
    p = CalibratedProfile(
        **{**_fields(TINY_CPU), "prefill_step_us": 1000.0, "prefill_quad_us_per_ktok2": 4000.0}
    )
    assert p.step_time(0, 4, 0) == pytest.approx(TINY_CPU.step_time(0, 4, 0))
    assert p.step_time(1000, 0, 0) == pytest.approx(TINY_CPU.step_time(1000, 0, 0) + 5000e-6)
    # One chunk with no prefix is what the old call meant: the same figure.
    assert p.step_time(1000, 0, 0, [(1000, 0)]) == pytest.approx(p.step_time(1000, 0, 0))
    # 3000 tokens at a 2048 budget: two prefill steps, the second attending to the first's 2048 tokens.
    assert p.expected_ttft(3000) == pytest.approx(
        p.step_time(2048, 0, 0, [(2048, 0)]) + p.step_time(952, 0, 0, [(952, 2048)])
    )
    # The quadratic term adds up to the whole prompt's square, however it was chunked.
    quad = p.expected_ttft(3000) - TINY_CPU.expected_ttft(3000) - 2 * p.prefill_step_us * 1e-6
    assert quad == pytest.approx(4000.0 * 3.0**2 * 1e-6)


def test_prefill_chunks_are_priced_apart() -> None:
    p = CalibratedProfile(**{**_fields(TINY_CPU), "prefill_quad_us_per_ktok2": 4000.0})
    two = p.step_time(2000, 0, 0, [(1000, 0), (1000, 0)])
    # Two requests' 1000-token chunks: each attends to itself, half the square of one 2000-token chunk.
    assert two - TINY_CPU.step_time(2000, 0, 0) == pytest.approx(2 * 4000.0 * 1e-6)
    assert p.step_time(2000, 0, 0) - TINY_CPU.step_time(2000, 0, 0) == pytest.approx(4 * 4000.0 * 1e-6)
    # A chunk after a prefix attends to the prefix too.
    assert p.step_time(1000, 0, 0, [(1000, 1000)]) - TINY_CPU.step_time(1000, 0, 0) == pytest.approx(
        3 * 4000.0 * 1e-6
    )


def test_request_overhead_counts_once_per_request() -> None:
    fields = {"request_overhead_us": 7000.0, "request_overhead_us_per_ktok": 2000.0}
    p = CalibratedProfile(**{**_fields(TINY_CPU), **fields})
    assert p.step_time(100, 2, 100) == pytest.approx(TINY_CPU.step_time(100, 2, 100))
    assert p.request_overhead(3000) == pytest.approx(7000e-6 + 3 * 2000e-6)
    assert p.expected_ttft(3000) == pytest.approx(TINY_CPU.expected_ttft(3000) + p.request_overhead(3000))


def _fields(profile: object) -> dict[str, object]:
    import dataclasses

    return dataclasses.asdict(profile)  # type: ignore[call-overload, no-any-return]


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_profile_file_round_trip_and_get_profile(tmp_path: Path, suffix: str) -> None:
    p = CalibratedProfile(**{**_fields(TINY_CPU), "name": "mine", "prefill_step_us": 123.0})
    path = tmp_path / f"mine{suffix}"
    write_profile_file(path, p, {"url": "http://x", "samples": []})
    assert load_profile_file(path) == p
    assert get_profile(str(path)) == p
    plain = tmp_path / f"plain{suffix}"
    write_profile_file(plain, TINY_CPU)
    assert type(get_profile(str(plain))) is type(TINY_CPU)


def test_profile_file_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown profile field"):
        profile_from_dict({**_fields(TINY_CPU), "beta9_us": 1.0})
    with pytest.raises(ConfigError, match="missing"):
        profile_from_dict({"name": "x"})
    with pytest.raises(ConfigError, match="cannot read"):
        get_profile(str(tmp_path / "absent.yaml"))
    with pytest.raises(ConfigError, match="unknown simulator profile"):
        get_profile("no-such-profile")


@pytest.fixture
def sim_engine(tmp_path: Path) -> str:
    """``infctl sim`` in a child process, with the tiny-cpu step model plus the calibrated terms."""
    truth = CalibratedProfile(
        **{
            **_fields(TINY_CPU),
            "name": "truth",
            "max_num_seqs": 64,
            "num_gpu_blocks": 4096,
            "beta2_us": 400.0,
            "request_overhead_us": 3000.0,
        }
    )
    path = tmp_path / "truth.json"
    write_profile_file(path, truth)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "infctl", "sim", "--profile", str(path), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    # Python's start-up and imports: ~1 s here, many times that on a loaded machine.
    deadline, last = time.monotonic() + 90, "no answer"
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            resp = httpx.get(url + "/health", timeout=2, trust_env=False)
            if resp.status_code == 200:
                break
            last = f"{resp.status_code} {resp.text[:200]}"
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"infctl sim on port {port} not healthy (exit code {proc.poll()}; last: {last})")
    yield url  # type: ignore[misc]
    proc.terminate()
    proc.wait(10)


@pytest.fixture(scope="module", autouse=True)
def _commands() -> None:
    if not any(g.name == "sim" for g in app.registered_groups):
        _register()


QUICK = {
    "prompt_lengths": (16, 256, 1024, 2048),
    "ttft_repeats": 3,
    "batch_sizes": (1, 4, 12),
    "itl_contexts": (32, 1024),
    "itl_output_tokens": 24,
    "itl_repeats": 1,
    "warmup_requests": 1,
    "max_num_seqs": 64,
}


async def test_calibrating_the_simulator_recovers_its_step_model(sim_engine: str) -> None:
    # The simulator stamps its histograms with its step model's times, unless its loop falls more than
    # RESYNC_SECONDS behind (a loaded machine): that step then counts the lag too. Load only ever adds time,
    # so each ITL point is the fastest of three runs (quantile 0), and the fit trims a point far above it.
    quick = {**QUICK, "itl_repeats": 3, "quantile": 0.0}
    settings = CalibrationSettings(url=sim_engine, name="fitted", compensate=False, **quick)  # type: ignore[arg-type]
    result = await calibrate(settings)
    c = result.fit.coefficients
    # ITL comes from the simulator's own histograms, stamped with its step model: the decode terms come back
    # (up to the fit's rounding).
    assert result.itl and all(s.source == "engine" for s in result.itl)
    assert c["beta0_us"] == pytest.approx(2000.0, rel=0.05)
    assert c["beta2_us"] == pytest.approx(400.0, rel=0.05)
    assert c["attn_us_per_ktok"] == pytest.approx(TINY_CPU.attn_us_per_ktok, abs=5.0)
    # TTFT is timed by the client, which adds whatever the machine's load adds on top of the simulator's own
    # ~2-6 ms per request; the engine timed each prefill itself (its prefill histogram), so the step terms
    # come from its clock, whatever the load, and the overhead holds the rest: at least the simulated 3 ms.
    assert all(s.engine_prefill_s is not None for s in result.ttft)
    assert c["request_overhead_us"] >= 3000.0 * 0.9
    assert c["beta1_us"] == pytest.approx(TINY_CPU.beta1_us, rel=0.05)
    steps_only = {**c, "request_overhead_us": 0.0, "request_overhead_us_per_ktok": 0.0}
    predicted = predict_us(steps_only, ttft_regressors(TtftSample(2048, 0.0), 2048)) * 1e-6
    truth = CalibratedProfile(**{**_fields(TINY_CPU), "beta2_us": 400.0})
    assert predicted == pytest.approx(truth.expected_ttft(2048), rel=0.05)
    # Not asserted: the fit's max_rel_error over the client-timed TTFT rows, which a busy machine's noise on
    # one short prompt alone pushed to 0.40-0.58 here (1 run in 4 even with no test load of its own).
    assert result.profile.block_size == TINY_CPU.block_size and result.profile.model == TINY_CPU.model


def test_cli_writes_a_profile_that_sim_loads(sim_engine: str, tmp_path: Path) -> None:
    out = tmp_path / "fitted.yaml"
    args = [
        "-o",
        "json",
        "sim",
        "calibrate",
        "--url",
        sim_engine,
        "--out",
        str(out),
        "--name",
        "fitted",
        "--quick",
    ]
    result = CliRunner().invoke(app, [*args, "--max-num-seqs", "64"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["written"] == str(out) and summary["served_fit_us"] is not None
    profile = get_profile(str(out))
    assert isinstance(profile, CalibratedProfile) and profile.name == "fitted"
    # Compensated: the file holds each fitted term moved by how far the served simulator's fit landed from it
    # (2 x fit - served, at least 0), as the summary reports them.
    fitted, served = summary["coefficients_us"], summary["served_fit_us"]
    for term in ("beta0_us", "beta1_us", "beta2_us", "attn_us_per_ktok", "request_overhead_us"):
        expected = max(0.0, 2 * fitted[term] - served[term])
        assert getattr(profile, term) == pytest.approx(expected, rel=1e-3, abs=0.01), (term, summary)
    # And they are the engine's: the decode terms come from the simulator's own clock (one run per point
    # with --quick, so a loaded machine's lag can move them a little: 10% seen; the truth is 2000 and 400).
    assert profile.beta0_us == pytest.approx(2000.0, rel=0.25)
    assert profile.beta2_us == pytest.approx(400.0, rel=0.25)


def test_cli_reports_an_unreachable_engine() -> None:
    result = CliRunner().invoke(app, ["sim", "calibrate", "--url", f"http://127.0.0.1:{free_port()}"])
    assert result.exit_code == 1
    assert "cannot reach" in result.output
