"""Does a calibrated simulator predict the real engine it was fitted to, on a workload it was not fitted on?

1. A real vLLM (CPU build) serves the tiny random Llama (``tools/make_tiny_model.py``); or pass ``--url``.
2. ``infctl sim calibrate`` (the library call) fits a profile to it: TTFT at prompt lengths 16, 128, 384, 768,
   1280, 2048; ITL at batches 1, 2, 4, 8, 16, 24 of 32- and 1024-token prompts.
3. ``infctl sim --profile`` serves that profile in a child process.
4. The same held-out workloads run against both, interleaved request by request so outside load falls on both:
   TTFT of lone requests at unseen lengths; ITL at unseen batch sizes and an unseen context; and a mixed
   closed loop (4 clients, prompts of 64-1500 tokens, 32 output tokens: prefills and decodes share steps).
   Figures are medians (this machine's two cores are shared; means are printed for information). ITL is
   each stream's average gap over the window where all streams decode (single gaps are ~0 when the API
   server flushes several tokens at once); the mixed loop reports time per output token per request.

    python benchmarks/bench_calibration.py [--url http://127.0.0.1:8000] [--out tiny-cpu.yaml]

Without ``--url`` it needs the vLLM venv (``INFCTL_VLLM_PYTHON``, default ``~/.cache/infctl/vllm-venv``,
which ``.ci/slow`` creates) and builds the tiny model into ``INFCTL_TINY_MODEL`` (default a temp dir).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from infctl.config import ModelProfile
from infctl.engines.vllm import ADAPTER
from infctl.sim.calib_loop import free_port, simulated_engine
from infctl.sim.calib_measure import EngineClient, make_session, measure_itl, prompt_words
from infctl.sim.calib_profile import write_profile_file
from infctl.sim.calibrate import CalibrationSettings, calibrate

TOLERANCE = 0.10
REPO = Path(__file__).resolve().parents[1]
HELD_OUT_LENGTHS = (64, 256, 600, 1000, 1700)
HELD_OUT_ITL = ((3, 512), (6, 512), (12, 256), (20, 512))
SALT = secrets.randbits(40)
"""Mixed into every prompt's seed: a vLLM reused across runs (--url) must not serve them from its cache."""


@asynccontextmanager
async def real_vllm(session: aiohttp.ClientSession) -> AsyncIterator[str]:
    python = os.environ.get("INFCTL_VLLM_PYTHON") or str(Path.home() / ".cache/infctl/vllm-venv/bin/python")
    with tempfile.TemporaryDirectory(prefix="bench-calib-") as tmp:
        model_dir = os.environ.get("INFCTL_TINY_MODEL") or str(Path(tmp) / "tiny")
        subprocess.run([python, str(REPO / "tools/make_tiny_model.py"), model_dir], check=True)
        port = free_port()
        model = ModelProfile(engine="vllm", model=model_dir, served_model_name="tiny", max_model_len=4096)
        argv = [python, *ADAPTER.launch_command(model, role="both", port=port, host="127.0.0.1")[1:]]
        log = (Path(tmp) / "vllm.log").open("wb")
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        url = f"http://127.0.0.1:{port}"
        try:
            started = time.monotonic()
            while time.monotonic() - started < 600:
                if proc.poll() is not None:
                    raise SystemExit(f"vLLM exited with {proc.returncode}; see {log.name}")
                try:
                    async with session.get(url + "/health") as resp:
                        if resp.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(1)
            print(f"vLLM up at {url} after {time.monotonic() - started:.0f} s", flush=True)
            yield url
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(30)
            log.close()


Row = tuple[str, list[float], list[float]]


async def held_out_ttft(real: EngineClient, sim: EngineClient, repeats: int = 7) -> list[Row]:
    rows: list[Row] = []
    for n in HELD_OUT_LENGTHS:
        r_times: list[float] = []
        s_times: list[float] = []
        for rep in range(repeats):
            prompt = prompt_words(n, SALT + 90_000 + n * 31 + rep)
            r_times.append((await real.stream(prompt, 1)).ttft)
            s_times.append((await sim.stream(prompt, 1)).ttft)
        rows.append((f"TTFT, lone request, {n} tokens", r_times, s_times))
    return rows


async def held_out_itl(real: EngineClient, sim: EngineClient, repeats: int = 3) -> list[Row]:
    rows: list[Row] = []
    for batch, context in HELD_OUT_ITL:
        r_gaps: list[float] = []
        s_gaps: list[float] = []
        for rep in range(repeats):
            for client, out in ((real, r_gaps), (sim, s_gaps)):
                sample = await measure_itl(client, batch, context, 48, seed=SALT + 70_000 + batch * 101 + rep)
                if sample is not None:
                    out.append(sample.seconds)
        rows.append((f"ITL, {batch} streams of {context}-token prompts", r_gaps, s_gaps))
    return rows


async def mixed(client: EngineClient, seed: int = 5) -> tuple[list[float], list[float]]:
    """4 closed-loop clients, 32 requests, prompts of 64-1500 tokens, 32 output tokens each."""
    rng = random.Random(seed)
    queue = [(prompt_words(rng.randint(64, 1500), SALT + 50_000 + i), 32) for i in range(32)]
    ttfts: list[float] = []
    gaps: list[float] = []

    async def worker() -> None:
        while queue:
            prompt, out = queue.pop(0)
            res = await client.stream(prompt, out)
            ttfts.append(res.ttft)
            # Per request (TPOT), counted in tokens: single gaps mislead when tokens arrive in bursts.
            per_token = res.time_per_token()
            if per_token is not None:
                gaps.append(per_token)

    await asyncio.gather(*(worker() for _ in range(4)))
    return ttfts, gaps


def report(rows: list[Row]) -> int:
    print(f"\n{'held-out workload':<48} {'vLLM ms':>9} {'sim ms':>9} {'error':>8}   (medians; means)")
    within = 0
    for name, real, sim in rows:
        if not real or not sim:
            print(f"{name:<48} {'n/a':>9} {'n/a':>9}   (no window where all streams decoded together)")
            continue
        r, s = statistics.median(real), statistics.median(sim)
        err = (s - r) / r
        within += abs(err) <= TOLERANCE
        mark = "ok" if abs(err) <= TOLERANCE else "MISS"
        means = f"{statistics.mean(real) * 1e3:.2f} vs {statistics.mean(sim) * 1e3:.2f}"
        print(f"{name:<48} {r * 1e3:>9.2f} {s * 1e3:>9.2f} {err:>+8.1%} {mark:>4}   ({means})")
    print(f"\n{within} of {len(rows)} held-out figures predicted within {TOLERANCE:.0%}")
    return within


def load_average() -> str:
    """Other work on this machine's two cores moves every figure here; say how much there was."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


async def main(url: str | None, out: Path | None) -> None:
    print(load_average(), flush=True)
    async with make_session() as session:
        if url is None:
            async with real_vllm(session) as started:
                await run(session, started, out)
        else:
            await run(session, url, out)


async def run(session: aiohttp.ClientSession, url: str, out: Path | None) -> None:
    settings = CalibrationSettings(url=url, name="tiny-cpu-calibrated")
    t0 = time.perf_counter()
    cal = await calibrate(settings, session=session, progress=lambda m: print("  " + m, flush=True))
    print(f"calibrated in {time.perf_counter() - t0:.0f} s; in-sample max error {cal.fit.max_rel_error:.1%}")
    print("fitted (us):   ", {k: round(v, 1) for k, v in cal.fit.coefficients.items()})
    if cal.served is not None:
        print("sim served (us):", {k: round(v, 1) for k, v in cal.served.coefficients.items()})
    p = cal.profile
    print(
        f"profile: beta0 {p.beta0_us:.0f} us, prefill_step {p.prefill_step_us:.0f} us, "
        f"beta1 {p.beta1_us:.2f} us, beta2 {p.beta2_us:.1f} us, attn {p.attn_us_per_ktok:.1f} us/ktok, "
        f"prefill_quad {p.prefill_quad_us_per_ktok2:.0f} us/ktok^2"
    )
    if out is not None:
        write_profile_file(out, p, cal.metadata(settings))
        print(f"wrote {out}")
    async with simulated_engine(p, session) as sim_url:
        real = EngineClient(session, url, cal.info.model)
        sim = EngineClient(session, sim_url, cal.info.model)
        for client in (real, sim):
            await client.stream(prompt_words(32, 1), 8)
        rows = await held_out_ttft(real, sim)
        rows += await held_out_itl(real, sim)
        r_ttft, r_gaps = await mixed(real)
        s_ttft, s_gaps = await mixed(sim)
        rows += [
            ("mixed, 4 clients: TTFT", r_ttft, s_ttft),
            ("mixed, 4 clients: time per output token", r_gaps, s_gaps),
        ]
    report(rows)
    print(load_average())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running engine to calibrate against (default: start vLLM here)")
    parser.add_argument("--out", type=Path, help="also write the calibrated profile here")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.out))
    sys.exit(0)
