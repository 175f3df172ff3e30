"""Does a calibrated simulator predict the real engine it was fitted to, on a workload it was not fitted on?

1. A real vLLM (CPU build) serves the tiny random Llama (``tools/make_tiny_model.py``); or pass ``--url``.
2. ``infctl sim calibrate`` (the library call) fits a profile to it: TTFT at prompt lengths 16, 128, 384, 768,
   1280, 2048 (the client's, and vLLM's own ``request_prefill_time_seconds`` for the steps alone: the rest is
   the per-request overhead, which the simulator spends before a request reaches its core); ITL at batches
   1, 2, 4, 8, 16, 24 of 32- and 1024-token prompts.
3. The held-out workloads run on vLLM *between* calibration's rounds (``calibrate(between=...)``), twice each
   with fresh prompts (the A/A column: how far the real engine lands from itself bounds how well any
   prediction can be judged on this machine), so a burst of outside load falls on the fitted points and the
   judged ones alike: TTFT of lone requests at unseen lengths; ITL at unseen batch sizes and an unseen
   context; and a mixed closed loop (4 clients, prompts of 64-1500 tokens, 32 output tokens: prefills and
   decodes share steps).
4. ``infctl sim --profile`` serves the fitted profile in a child process and runs the same rounds with the
   prompts of vLLM's first column.

Each point is judged at ``--quantile`` of its repeats (default the lower quartile, which the fit uses too:
other work on this machine only ever adds latency; the medians' verdict is printed beside it). ITL is the
engine's own mean step time over steps where the whole batch decoded (``vllm:inter_token_latency_seconds``
read during the run, in both engines; see ``infctl.sim.calib_counters``), the median of its means over the
intervals between two reads, so a stall of this machine (which the simulator, like a descheduled vLLM, books
into the next token's gap) moves it only once it hits half the intervals; how far the stalls moved the plain
mean is printed under the table ("host stalls"); the mixed loop's time per output
token is the engine's ``request_time_per_output_token_seconds`` mean per round; TTFTs are the client's.

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
from infctl.engines.vllm import REQUEST_TIME_PER_OUTPUT_TOKEN as TPOT
from infctl.sim.calib_counters import delta, scrape
from infctl.sim.calib_fit import ItlSample
from infctl.sim.calib_loop import free_port, simulated_engine
from infctl.sim.calib_measure import EngineClient, engine_info, make_session, measure_itl, prompt_words
from infctl.sim.calib_profile import write_profile_file
from infctl.sim.calibrate import CalibrationSettings, calibrate, quantile
from infctl.tokenization import Tokenizer, load_tokenizer
from infctl.tokens import gb2312_level1

TOLERANCE = 0.10
REPO = Path(__file__).resolve().parents[1]
HELD_OUT_LENGTHS = (64, 256, 600, 1000, 1700)
HELD_OUT_CHINESE = (300, 1200)
"""Lone Chinese prompts of about these many tokens (the model's tokenizer): the simulator, given the same
tokenizer (``infctl sim --tokenizer``), must count and time them as vLLM does."""
HELD_OUT_ITL = ((3, 512), (6, 512), (12, 256), (20, 512))
ITL_OUTPUT_TOKENS = 160
DEFAULT_QUANTILE = 0.25
"""Each point is fitted and judged by the lower quartile of its repeats: the engine's latency when it had the
CPU. Other work on a shared machine only ever adds latency, in bursts no simulator can know of; the medians'
verdict is printed beside it."""
SALT = secrets.randbits(40)
"""Mixed into every prompt's seed: a vLLM reused across runs (--url) must not serve them from its cache."""


@asynccontextmanager
async def real_vllm(session: aiohttp.ClientSession) -> AsyncIterator[tuple[str, str]]:
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
            yield url, model_dir
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(30)
            log.close()


Row = tuple[str, list[float], list[float], list[float]]
"""Name, vLLM, simulator, vLLM again (the A/A pass: how far the real engine moves from itself)."""

TTFT_REPEATS, ITL_REPEATS, MIXED_ROUNDS = 7, 5, 4
SIM_ITL_REPEATS = 3
"""The simulator's ITL is its step model's, read from its own histograms: the same to 0.1% run after run,
so fewer runs than vLLM's (whose quantile they still go through) save the benchmark time."""


class HeldOut:
    """The held-out workloads, one round at a time, into three columns per figure: vLLM, the simulator and
    vLLM again. vLLM's rounds run between calibration's own rounds (``calibrate(between=...)``), so a burst
    of outside load falls on the fitted points and the judged ones alike; the simulator's run once it exists.
    """

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.ttft: dict[int, tuple[list[float], list[float], list[float]]] = {
            n: ([], [], []) for n in HELD_OUT_LENGTHS
        }
        self.tokenizer = tokenizer
        """The model's, for the Chinese prompts; None: no Chinese rows."""
        self.chinese: dict[int, tuple[list[float], list[float], list[float]]] = {
            n: ([], [], []) for n in (HELD_OUT_CHINESE if tokenizer else ())
        }
        self.itl: dict[tuple[int, int], tuple[list[ItlSample], list[ItlSample], list[ItlSample]]] = {
            point: ([], [], []) for point in HELD_OUT_ITL
        }
        self.mixed_ttft: tuple[list[float], list[float], list[float]] = ([], [], [])
        self.mixed_tpot: tuple[list[float], list[float], list[float]] = ([], [], [])

    async def real_round(self, real: EngineClient, r: int) -> None:
        """Round ``r`` on vLLM: each figure once, then once more with fresh prompts (the A/A column)."""
        if r < TTFT_REPEATS:
            await self._ttft(real, r, 0)
            await self._ttft(real, r, 2)
        if r < ITL_REPEATS:
            await self._itl(real, r, 0)
            await self._itl(real, r, 2)
        if r < MIXED_ROUNDS:
            await self._mixed(real, r, 0)
            await self._mixed(real, r, 2)

    async def sim_rounds(self, sim: EngineClient) -> None:
        """Every round on the simulator, with the prompts vLLM's first column had."""
        for r in range(max(TTFT_REPEATS, ITL_REPEATS, MIXED_ROUNDS)):
            if r < TTFT_REPEATS:
                await self._ttft(sim, r, 1)
            if r < SIM_ITL_REPEATS:
                await self._itl(sim, r, 1)
            if r < MIXED_ROUNDS:
                await self._mixed(sim, r, 1)

    @staticmethod
    def _salt(column: int) -> int:
        # The A/A column's prompts differ from the others' (the real engine has cached those).
        return SALT + (100_000 if column == 2 else 0)

    async def _ttft(self, client: EngineClient, r: int, column: int) -> None:
        for n in HELD_OUT_LENGTHS:
            prompt = prompt_words(n, self._salt(column) + 90_000 + n * 31 + r)
            self.ttft[n][column].append((await client.stream(prompt, 1)).ttft)
        for n, cols in self.chinese.items():
            assert self.tokenizer is not None
            prompt = chinese_prompt(self.tokenizer, n, self._salt(column) + 80_000 + n * 31 + r)
            cols[column].append((await client.stream(prompt, 1)).ttft)

    async def _itl(self, client: EngineClient, r: int, column: int) -> None:
        for batch, context in HELD_OUT_ITL:
            seed = self._salt(column) + 70_000 + batch * 101 + r
            sample = await measure_itl(client, batch, context, ITL_OUTPUT_TOKENS, seed=seed)
            if sample is not None:
                self.itl[batch, context][column].append(sample)

    async def _mixed(self, client: EngineClient, r: int, column: int) -> None:
        got_ttft, got_tpot = await mixed(client, self._salt(column) + 50_000 + 1000 * r)
        self.mixed_ttft[column].extend(got_ttft)
        self.mixed_tpot[column].extend(got_tpot)

    def rows(self) -> list[Row]:
        rows: list[Row] = [(f"TTFT, lone request, {n} tokens", *cols) for n, cols in self.ttft.items()]
        rows += [(f"TTFT, lone Chinese request, ~{n} tokens", *cols) for n, cols in self.chinese.items()]
        for (batch, context), runs in self.itl.items():
            # Engine-timed runs where a column has any (client-timed ones not mixed in), as calibrate does.
            columns = [[s for s in col if s.source == "engine"] or col for col in runs]
            sources = "/".join(sorted({s.source for col in columns for s in col}))
            r, m, a = ([s.seconds for s in col] for col in columns)
            rows.append((f"ITL, {batch} x {context}-token prompts ({sources})", r, m, a))
        rows.append(("mixed, 4 clients: TTFT", *self.mixed_ttft))
        rows.append(("mixed, 4 clients: time per output token", *self.mixed_tpot))
        return rows

    def stalls(self) -> list[str]:
        """Per ITL point and column, the largest share by which stalls moved a run's plain mean gap above
        the median interval the figures use (0% on a quiet machine)."""
        lines = []
        for (batch, context), runs in self.itl.items():
            shares = [[s.stall_share for s in col if s.stall_share is not None] for col in runs]
            cells = [f"{max(col):+.0%}" if col else "n/a" for col in shares]
            vllm, sim, again = cells
            lines.append(f"  ITL, {batch} x {context}: vLLM {vllm}, sim {sim}, vLLM again {again}")
        return lines


def chinese_prompt(tokenizer: Tokenizer, tokens: int, seed: int) -> str:
    """Chinese text (GB2312's common hanzi in clauses) of at least ``tokens`` tokens by ``tokenizer``."""
    rng = random.Random(seed)
    hanzi = gb2312_level1()
    text = ""
    while tokenizer.count(text, special=False) < tokens:
        text += "".join(rng.choices(hanzi, k=rng.randint(6, 20))) + "\uff0c"
    return text


async def mixed(client: EngineClient, salt: int, requests: int = 16) -> tuple[list[float], list[float]]:
    """4 closed-loop clients, ``requests`` requests, prompts of 64-1500 tokens, 32 output tokens each.

    Returns the client's TTFTs and one time per output token: the engine's mean over these requests (its
    ``request_time_per_output_token_seconds`` histogram read before and after), or the client's per-request
    figures when the engine does not expose it."""
    rng = random.Random(5)
    queue = [(prompt_words(rng.randint(64, 1500), salt + i), 32) for i in range(requests)]
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

    before = await scrape(client.session, client.base_url)
    await asyncio.gather(*(worker() for _ in range(4)))
    after = await scrape(client.session, client.base_url)
    engine = None if before is None or after is None else delta(before, after, TPOT).mean
    return ttfts, gaps if engine is None else [engine]


def report(rows: list[Row], q: float) -> int:
    """Print each row's ``q`` quantile (vLLM, simulator, error, vLLM again, A/A) and the medians' error."""
    stat = "median" if q == 0.5 else f"p{q * 100:g}"
    print(
        f"\n{'held-out workload (' + stat + ')':<42} {'vLLM ms':>8} {'sim ms':>8} {'error':>8}"
        f"      {'vLLM again':>10} {'A/A':>7}   (medians vLLM/sim: error)"
    )
    within = aa_within = median_within = 0
    for name, real, sim, again in rows:
        if not real or not sim or not again:
            columns = (("vLLM", real), ("sim", sim), ("vLLM again", again))
            empty = ", ".join(c for c, runs in columns if not runs)
            print(f"{name:<42} {'n/a':>8}   (no window where all streams decoded together: {empty})")
            continue
        r, s, a = quantile(real, q), quantile(sim, q), quantile(again, q)
        err, aa = (s - r) / r, (a - r) / r
        within += abs(err) <= TOLERANCE
        aa_within += abs(aa) <= TOLERANCE
        mark = "ok" if abs(err) <= TOLERANCE else "MISS"
        mr, ms = statistics.median(real), statistics.median(sim)
        median_within += abs(ms - mr) <= TOLERANCE * mr
        medians = f"{mr * 1e3:.2f}/{ms * 1e3:.2f}: {(ms - mr) / mr:+.1%}"
        figures = f"{r * 1e3:>8.2f} {s * 1e3:>8.2f} {err:>+8.1%} {mark:>4} {a * 1e3:>10.2f} {aa:>+7.1%}"
        print(f"{name:<42} {figures}   ({medians})")
    n = len(rows)
    print(f"\n{within} of {n} held-out figures ({stat}) predicted within {TOLERANCE:.0%} by the simulator;")
    print(f"{aa_within} of {n} within {TOLERANCE:.0%} of themselves when vLLM ran them again (A/A);")
    print(f"{median_within} of {n} within {TOLERANCE:.0%} when judged on medians instead")
    return within


def load_average() -> str:
    """Other work on this machine's two cores moves every figure here; say how much there was."""
    one, five, _ = os.getloadavg()
    return f"load average {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} CPUs"


async def main(url: str | None, out: Path | None, q: float, tokenizer: str | None) -> None:
    print(load_average(), flush=True)
    async with make_session() as session:
        if url is None:
            async with real_vllm(session) as (started, model_dir):
                await run(session, started, out, q, model_dir)
        else:
            await run(session, url, out, q, tokenizer)


async def run(
    session: aiohttp.ClientSession, url: str, out: Path | None, q: float, tokenizer: str | None
) -> None:
    settings = CalibrationSettings(url=url, name="tiny-cpu-calibrated", quantile=q)
    info = await engine_info(session, url, None)
    real = EngineClient(session, url, info.model)
    held = HeldOut(load_tokenizer(tokenizer) if tokenizer else None)
    t0 = time.perf_counter()

    async def between(r: int) -> None:
        await held.real_round(real, r)

    cal = await calibrate(
        settings,
        session=session,
        progress=lambda m: print(f"  {time.perf_counter() - t0:5.0f} s  {m}", flush=True),
        between=between,
    )
    print(
        f"calibrated, with vLLM's held-out rounds in between, in {time.perf_counter() - t0:.0f} s; "
        f"in-sample max error {cal.fit.max_rel_error:.1%}"
    )
    print("fitted (us):   ", {k: round(v, 1) for k, v in cal.fit.coefficients.items()})
    for t in cal.ttft:
        steps = "n/a" if t.engine_prefill_s is None else f"{t.engine_prefill_s * 1e3:.2f}"
        rest = "n/a" if t.overhead_s is None else f"{t.overhead_s * 1e3:.2f}"
        print(f"  TTFT {t.prompt_tokens:>5} tokens: {t.seconds * 1e3:7.2f} ms = engine {steps} + rest {rest}")
    itl = [
        f"{r.x:g}: {r.measured_s * 1e3:.2f}/{r.predicted_s * 1e3:.2f}"
        for r in cal.fit.rows
        if r.kind == "itl"
    ]
    print("  ITL by batch, measured/model ms (32-token then 1024-token prompts):", ", ".join(itl))
    if cal.served is not None:
        print("sim served (us):", {k: round(v, 1) for k, v in cal.served.coefficients.items()})
    p = cal.profile
    print(
        f"profile: request_overhead {p.request_overhead_us:.0f} us + {p.request_overhead_us_per_ktok:.0f} "
        f"us/ktok, beta0 {p.beta0_us:.0f} us, "
        f"beta1 {p.beta1_us:.2f} us, beta2 {p.beta2_us:.1f} us, attn {p.attn_us_per_ktok:.1f} us/ktok, "
        f"prefill_quad {p.prefill_quad_us_per_ktok2:.0f} us/ktok^2"
    )
    if out is not None:
        write_profile_file(out, p, cal.metadata(settings))
        print(f"wrote {out}")
    async with simulated_engine(p, session, tokenizer=tokenizer) as sim_url:
        sim = EngineClient(session, sim_url, cal.info.model)
        await sim.stream(prompt_words(32, 1), 8)
        await held.sim_rounds(sim)
    report(held.rows(), q)
    print("host stalls: the most any run's plain mean gap exceeded its median interval (not in the figures)")
    print("\n".join(held.stalls()))
    print(load_average())


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running engine to calibrate against (default: start vLLM here)")
    parser.add_argument("--out", type=Path, help="also write the calibrated profile here")
    parser.add_argument(
        "--quantile",
        type=float,
        default=DEFAULT_QUANTILE,
        help="quantile of each point's repeats that is fitted and judged (default %(default)s; 0.5: medians)",
    )
    parser.add_argument(
        "--tokenizer",
        help="with --url: the model's directory, for the Chinese rows and the simulator's counts "
        "(default: none; without --url the tiny model's own)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.url, args.out, args.quantile, args.tokenizer))
    sys.exit(0)
