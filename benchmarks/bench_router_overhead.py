"""What a router costs: infctl, sglang-router and vllm-router against the same upstream, in one run.

    python benchmarks/bench_router_overhead.py [--rates 40,80] [--seconds 3] [--rounds 6]
        [--upstream sim|null] [--policies round_robin,cache_aware] [--concurrency 48] [--peers-bin DIR]
        [--loops asyncio,uvloop]   (one infctl row per event loop, to compare them in the same run)
        [--upstream-clients lean,aiohttp]   (one infctl row per upstream client, likewise)
        [--servers lean,aiohttp]   (one infctl row per stack: the lean front with the lean client, or
            aiohttp's server with aiohttp's client: what decides whether the hand-written pieces stay)
        [--repeat N]   (N measurements of each section: medians, spread and head-to-head counts)
        [--baseline DIR]   (each infctl row once more on the infctl package in DIR, tagged "baseline")
        [--input-tokens 2048] [--tokenizer kit|PATH|estimate]   (longer prompts, and what infctl counts
            them with: ``kit`` builds tests/tokenizerkit.py's real byte-level BPE; default: infctl's auto)

1. Fixed rates (open loop, 16-token streams, one engine): every target (the engine directly, then each router
   in front of it) gets ``--seconds`` of load per rate, in interleaved rounds so that the machine's noise
   falls on all of them alike. Reported: added TTFT and added end-to-end latency at p50 and p99, i.e. the
   router's percentile minus the direct run's, over every request of every round.
2. Saturation (closed loop, ``--concurrency`` streams in flight) against a null upstream that streams 16
   chunks ``--null-itl-ms`` apart, so the engine never limits. Reported: requests/s and streamed chunks/s
   per router core, i.e. completed requests (content chunks) divided by the CPU seconds the router's
   process tree used (utime + stime from /proc/<pid>/stat), plus the router's CPU utilisation.
3. After each section, the seconds from SIGTERM to each router's exit (nothing in flight by then).

``--repeat N`` measures sections 1 and 2 N times (each time ``--rounds`` interleaved rounds; the order of
the targets alternates) and prints each figure as the median over the N with its [min, max], then, for
every pair of rows with the same policy, in how many of the N the first one's added TTFT p50 (p99) was
no higher than the other's: a verdict that one run's noise cannot give. Every measurement of section 1
is also compared round by round (``--repeat`` x ``--rounds`` rounds; the targets of one round share its
minute of noise): for each infctl row and every other row of its policy, the per-round differences of added
TTFT p50 (p99) get their median and a sign-test confidence interval (``infctl.bench.paired``), and a
verdict: ahead or behind when the interval excludes 0, tie when it holds 0 (fewer than 6 rounds: always
tie). The last lines say, over every rate, whether each infctl row is no worse (never behind) than each peer.

``--baseline DIR`` measures a change against the code it replaces in the same run: every infctl row is
started a second time with ``PYTHONPATH=DIR``, so that it imports the ``infctl`` package found there, e.g.
``git archive HEAD infctl | tar -x -C DIR`` before the change (only the package is taken from DIR).

``--upstream`` picks the engine of section 1: ``sim`` is one ``infctl sim`` engine in real time (the issue's
setting), ``null`` the null server (less noise: its TTFT is a fraction of a millisecond, or
``--null-ttft-ms``: a known delay before its first chunk, e.g. 20 for a real engine's TTFT). Everything shares
this machine's cores (client, routers, upstream), so absolute figures move between runs; the ratios and
differences within one run are the point.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_router import Router, free_port, routers, wait_http

from infctl.bench import BenchConfig, LengthDist, LoadPlan, RandomSpec, Stage, run_benchmark
from infctl.bench.paired import Paired, paired
from infctl.bench.records import RequestRecord

MODEL = "m"
OUTPUT_TOKENS = 16
INPUT_TOKENS = 32
"""Mean prompt length (``--input-tokens``; set once by ``main``): tokens of ``TOKENIZER`` when it is a real
tokenizer, else the simulator's words (a real tokenizer spends ~5 tokens on each, with its salt tag)."""
TOKENIZER: str | None = None
"""``--tokenizer`` for every infctl row (``kit``: resolved to a built directory by ``main``)."""


def prompt_tokenizer() -> str | None:
    """What the prompts are cut with: the real tokenizer the routers count with, so that "2,048-token
    prompts" are 2,048 tokens as the engine sees them; none (words) for the estimate."""
    if TOKENIZER is None or TOKENIZER in ("auto", "estimate", "words") or TOKENIZER.startswith("engine"):
        return None
    return TOKENIZER


CLK_TCK = os.sysconf("SC_CLK_TCK")
WARMUP = 10


# -- the null upstream -------------------------------------------------------------------------------------
def serve_null(port: int, itl_ms: float, ttft_ms: float = 0.0) -> None:
    """A vLLM look-alike that does no work: ``ttft_ms`` after the request, 16 content chunks ``itl_ms``
    apart, then usage and [DONE].

    It answers what the three routers ask of a worker at start and while running (health, models, server
    info, a minimal vLLM /metrics), so each treats it as a healthy engine."""
    import json

    from aiohttp import web

    from infctl.engines import vllm

    def chunk(chat: bool, i: int) -> bytes:
        last = i == OUTPUT_TOKENS - 1
        body = {"delta": {"content": f" t{i}"}} if chat else {"text": f" t{i}"}
        choice = {"index": 0, **body, "finish_reason": "length" if last else None}
        obj = "chat.completion.chunk" if chat else "text_completion"
        event = {"id": "x", "object": obj, "model": MODEL, "choices": [choice]}
        return f"data: {json.dumps(event)}\n\n".encode()

    chunks = {chat: [chunk(chat, i) for i in range(OUTPUT_TOKENS)] for chat in (False, True)}
    usage = {"prompt_tokens": 32, "completion_tokens": OUTPUT_TOKENS, "total_tokens": 32 + OUTPUT_TOKENS}
    tail = f"data: {json.dumps({'id': 'x', 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode()
    metrics = "".join(
        f'{name}{{model_name="{MODEL}",engine="0"}} 0\n'
        for name in (vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING, vllm.KV_CACHE_USAGE_PERC)
    )
    metrics += f'{vllm.CACHE_CONFIG_INFO}{{engine="0",block_size="16",num_gpu_blocks="100000"}} 1\n'
    delay, first_delay = itl_ms / 1000, ttft_ms / 1000

    async def complete(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        chat = request.path.endswith("chat/completions")
        if first_delay:
            await asyncio.sleep(first_delay)
        if not body.get("stream"):
            text = "".join(f" t{i}" for i in range(OUTPUT_TOKENS))
            choice = {"index": 0, "finish_reason": "length"}
            choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            return web.json_response({"id": "x", "model": MODEL, "choices": [choice], "usage": usage})
        resp = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await resp.prepare(request)
        for c in chunks[chat]:
            await resp.write(c)
            await asyncio.sleep(delay)
        await resp.write(tail)
        await resp.write_eof()
        return resp

    def static(make: Callable[[], web.Response]) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(_: web.Request) -> web.Response:
            return make()

        return handler

    info = {"model_path": MODEL, "served_model_name": MODEL, "is_generation": True}
    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", static(lambda: web.json_response({"data": [{"id": MODEL}]})))
    for path in ("/get_model_info", "/model_info", "/get_server_info", "/server_info"):
        app.router.add_get(path, static(lambda: web.json_response(info)))
    app.router.add_get("/load", static(lambda: web.json_response({"server_load": 0})))
    app.router.add_get("/metrics", static(lambda: web.Response(text=metrics)))
    for path in ("/health", "/health_generate"):
        app.router.add_get(path, static(web.Response))
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def start_upstream(kind: str, itl_ms: float, ttft_ms: float = 0.0) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    if kind == "null":
        argv = [sys.executable, __file__, "--serve-null", str(port), "--null-itl-ms", str(itl_ms)]
        argv += ["--null-ttft-ms", str(ttft_ms)]
    else:
        argv = [sys.executable, "-m", "infctl", "sim", "--port", str(port), "--model", MODEL]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health", proc)
    return proc, url


# -- measuring ---------------------------------------------------------------------------------------------
def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by ``pid`` and its live descendants (the peers' launchers)."""
    children: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                raw = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
            stats[int(entry)] = fields
            children.setdefault(int(fields[1]), []).append(int(entry))
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        if p in stats:
            total += int(stats[p][11]) + int(stats[p][12])  # utime, stime (fields 14 and 15)
        todo.extend(children.get(p, ()))
    return total / CLK_TCK


async def load(url: str, stage: Stage, label: str, seed: int = 1) -> list[RequestRecord]:
    """``stage`` against ``url``; ``seed`` picks the prompts: every target of a round gets the same ones,
    each round new ones (a router that remembers tokenized prompts must not meet them again)."""
    cfg = BenchConfig(
        url=url,
        model=MODEL,
        workload=RandomSpec(input=LengthDist(mean=INPUT_TOKENS), output=LengthDist(mean=OUTPUT_TOKENS)),
        extra_body={"ignore_eos": True},
        tokenizer=prompt_tokenizer(),
        load=LoadPlan(stages=[stage], warmup=WARMUP),
        seed=seed,
        label=label,
    )
    return (await run_benchmark(cfg)).requests


def quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] if s else float("nan")


Figures = dict[str, float]
"""ttft50, ttft99, e2e50, e2e99 (seconds) and failed (requests) of one target in one repeat."""
CELLS = ("ttft50", "ttft99", "e2e50", "e2e99")


def latencies(records: list[RequestRecord]) -> Figures:
    ok = [r for r in records if r.ok and r.chunk_times]
    ttft = [r.chunk_times[0] - r.sent_s for r in ok]
    e2e = [r.end_s - r.sent_s for r in ok]
    return {
        "ttft50": quantile(ttft, 0.5), "ttft99": quantile(ttft, 0.99),
        "e2e50": quantile(e2e, 0.5), "e2e99": quantile(e2e, 0.99),
        "failed": float(len(records) - len(ok)),
    }  # fmt: skip


def added_to_direct(records: dict[str, list[RequestRecord]]) -> dict[str, Figures]:
    """Per target, the direct run's own figures, or every router's added to them (its percentile minus
    the direct run's, from the same records' time)."""
    stats = {name: latencies(recs) for name, recs in records.items()}
    d = stats["direct"]
    return {
        name: st if name == "direct" else {k: st[k] - d[k] for k in CELLS} | {"failed": st["failed"]}
        for name, st in stats.items()
    }


async def fixed_rates(
    targets: list[tuple[str, str]], rates: list[float], seconds: float, rounds: int, repeat: int = 1
) -> dict[float, tuple[dict[str, list[Figures]], dict[str, list[Figures]]]]:
    """Per rate, per target: one :data:`Figures` per repeat (each over its ``rounds`` rounds' requests)
    and one per round (for the paired comparisons: the targets of one round share its noise)."""
    out: dict[float, tuple[dict[str, list[Figures]], dict[str, list[Figures]]]] = {}
    for rate in rates:
        stage = Stage(rate=rate, num_requests=int(rate * seconds))
        per_target: dict[str, list[Figures]] = {name: [] for name, _ in targets}
        per_round: dict[str, list[Figures]] = {name: [] for name, _ in targets}
        for rep in range(repeat):
            pooled: dict[str, list[RequestRecord]] = {name: [] for name, _ in targets}
            for rnd in range(rounds):
                turn = rep * rounds + rnd
                order = targets if turn % 2 == 0 else targets[::-1]  # no target always goes first
                this_round: dict[str, list[RequestRecord]] = {}
                for name, url in order:
                    this_round[name] = await load(url, stage, name, seed=1 + turn + 1000 * int(rate))
                    pooled[name] += this_round[name]
                for name, figs in added_to_direct(this_round).items():
                    per_round[name].append(figs)
            for name, figs in added_to_direct(pooled).items():
                per_target[name].append(figs)
        out[rate] = per_target, per_round
        print_fixed(rate, per_target, rounds, seconds)
        print_paired(per_round)
    return out


def spread(values: list[float], scale: float = 1.0, fmt: str = "+.2f") -> str:
    """``median`` alone for one value, else ``median [min, max]``."""
    xs = sorted(v * scale for v in values)
    med = statistics.median(xs)
    if len(xs) == 1:
        return format(med, fmt)
    return f"{med:{fmt}} [{xs[0]:{fmt}}, {xs[-1]:{fmt}}]"


def print_fixed(rate: float, per_target: dict[str, list[Figures]], rounds: int, seconds: float) -> None:
    n = len(per_target["direct"])
    times = f"{n} x " if n > 1 else ""
    print(
        f"\n== {rate:g} req/s of {OUTPUT_TOKENS}-token streams, {times}{rounds} x {seconds:g} s per target =="
    )
    width, lw = 9 if n == 1 else 24, max(34, *(len(name) + 8 for name in per_target))
    head = "".join(f" {c:>{width}s}" for c in ("TTFT p50", "p99", "E2E p50", "p99"))
    unit = "(ms, median [min, max] of repeats)" if n > 1 else "(ms)"
    print(f"{'target':{lw}s}{head} {'failed':>6s}  {unit}")
    for name, figs in per_target.items():
        label = name if name == "direct" else f"{name} (added)"
        fmt = ".2f" if name == "direct" else "+.2f"
        cells = "".join(f" {spread([f[c] for f in figs], 1e3, fmt):>{width}s}" for c in CELLS)
        print(f"{label:{lw}s}{cells} {int(sum(f['failed'] for f in figs)):6d}", flush=True)
    if n > 1:
        print_head_to_head(per_target)


def same_policy_pairs(per_target: dict[str, list[Figures]]) -> list[tuple[str, str]]:
    """(infctl row, other row) for every other row of the same policy."""
    names = [n for n in per_target if n != "direct"]
    return [
        (a, b)
        for a in names
        if a.startswith("infctl")
        for b in names
        if b != a and b.split()[1] == a.split()[1]
    ]


def head_to_head(per_target: dict[str, list[Figures]]) -> list[tuple[str, str, dict[str, int]]]:
    """(row, other row, cell -> repeats where row's figure was no higher than other's) for each infctl row
    against every other row of the same policy."""
    out = []
    for a, b in same_policy_pairs(per_target):
        pairs = list(zip(per_target[a], per_target[b], strict=True))
        out.append((a, b, {c: sum(x[c] <= y[c] for x, y in pairs) for c in ("ttft50", "ttft99")}))
    return out


def print_head_to_head(per_target: dict[str, list[Figures]]) -> None:
    n = len(per_target["direct"])
    print(f"head to head (repeats out of {n} where the first row's added TTFT was no higher):")
    for a, b, wins in head_to_head(per_target):
        print(f"  {a} vs {b}: p50 {wins['ttft50']}/{n}, p99 {wins['ttft99']}/{n}")


def paired_rows(per_round: dict[str, list[Figures]]) -> list[tuple[str, str, dict[str, Paired]]]:
    """(infctl row, other row, cell -> the per-round differences row minus other, summarised) for every
    other row of the same policy."""
    out = []
    for a, b in same_policy_pairs(per_round):
        rounds = list(zip(per_round[a], per_round[b], strict=True))
        out.append((a, b, {c: paired([x[c] - y[c] for x, y in rounds]) for c in ("ttft50", "ttft99")}))
    return out


def print_paired(per_round: dict[str, list[Figures]]) -> None:
    n = len(per_round["direct"])
    if n < 2:
        return
    print(
        f"paired over {n} rounds (first row minus second, added TTFT in ms: median [CI] rounds lower of {n}, "
        "verdict from the sign-test interval; tie = the interval holds 0):"
    )
    for a, b, cells in paired_rows(per_round):
        print(f"  {a} vs {b}: " + "; ".join(f"p{c[4:]} {_paired_text(p)}" for c, p in cells.items()))


def _paired_text(p: Paired) -> str:
    ci = f"[{p.low * 1e3:+.2f}, {p.high * 1e3:+.2f}] ({p.coverage:.0%})" if p.coverage else "[no 95% CI]"
    return f"{p.median * 1e3:+.2f} {ci} {p.lower}/{p.n} {p.verdict}"


def print_verdicts(fixed: dict[float, tuple[dict[str, list[Figures]], dict[str, list[Figures]]]]) -> None:
    """Over every rate: is each infctl row no worse than each peer (not ``behind``, paired per round)?"""
    tally: dict[tuple[str, str, str], list[str]] = {}
    for _, per_round in fixed.values():
        if len(per_round["direct"]) < 2:
            return
        for a, b, cells in paired_rows(per_round):
            if b.startswith("infctl"):
                continue
            for c, p in cells.items():
                tally.setdefault((a, b, c), []).append(p.verdict)
    if not tally:
        return
    print("\nverdict, added TTFT (paired per round, every rate): no worse = never behind")
    for (a, b, c), verdicts in tally.items():
        worse = "behind" in verdicts
        counts = ", ".join(f"{v} {verdicts.count(v)}" for v in ("ahead", "tie", "behind") if v in verdicts)
        print(f"  p{c[4:]:>2s} {a} vs {b}: {'WORSE' if worse else 'no worse'} ({counts})")


def paired_report(
    fixed: dict[float, tuple[dict[str, list[Figures]], dict[str, list[Figures]]]],
) -> dict[str, list[dict[str, object]]]:
    """The paired comparisons as JSON-ready data, per rate (an interval's open end is null)."""

    def cell(p: Paired) -> dict[str, object]:
        raw = asdict(p) | {"verdict": p.verdict}
        return {k: None if isinstance(v, float) and math.isinf(v) else v for k, v in raw.items()}

    return {
        str(rate): [
            {"row": a, "other": b, **{c: cell(p) for c, p in cells.items()}}
            for a, b, cells in paired_rows(per_round)
        ]
        for rate, (_, per_round) in fixed.items()
    }


async def saturation(
    rs: list[Router], url_of: dict[str, str], concurrency: int, seconds: float, repeat: int = 1
) -> dict[str, list[tuple[float, float]]]:
    """Per router, (requests/s per core, chunks/s per core) of each repeat (the order alternates)."""
    print(f"\n== saturation: {concurrency} streams in flight for {seconds:g} s, null upstream ==")
    lw = max(34, *(len(r.name) + 4 for r in rs))
    cols = f"{'req/s':>7s} {'CPU':>7s} {'req/s/core':>10s} {'CPU ms/req':>10s} "
    cols += f"{'chunks/s/core':>13s} {'failed':>6s}"
    print(f"{'router':{lw}s} {cols}")
    rows: dict[str, list[tuple[float, float]]] = {r.name: [] for r in rs}
    for rep in range(repeat):
        for r in rs if rep % 2 == 0 else rs[::-1]:
            assert r.proc is not None
            stage = Stage(concurrency=concurrency, duration_s=seconds)
            cpu0, t0 = tree_cpu_s(r.proc.pid), time.perf_counter()
            records = await load(url_of[r.name], stage, r.name, seed=500_000 + rep)  # unseen by section 1
            cpu, wall = tree_cpu_s(r.proc.pid) - cpu0, time.perf_counter() - t0
            ok = [x for x in records if x.ok]
            chunks = sum(len(x.chunk_times) for x in ok)
            served = len(ok) + WARMUP  # the warm-up requests are not in ``records`` but used the router's CPU
            per_core = served / cpu if cpu else float("nan")
            rows[r.name].append((per_core, per_core * chunks / max(len(ok), 1)))
            tag = f" #{rep + 1}" if repeat > 1 else ""
            print(
                f"{r.name + tag:{lw}s} {len(ok) / wall:7.0f} {cpu / wall:7.0%} {per_core:10.0f} "
                f"{1000 / per_core if per_core else float('nan'):10.3f} "
                f"{per_core * chunks / max(len(ok), 1):13.0f} {len(records) - len(ok):6d}",
                flush=True,
            )
    medians = {name: statistics.median(x[0] for x in v) for name, v in rows.items()}
    if repeat > 1:
        print(f"per core, median [min, max] of {repeat} repeats:")
        for name, v in rows.items():
            print(f"  {name:{lw}s} req/s {spread([x[0] for x in v], fmt='.0f'):>20s}  "
                  f"chunks/s {spread([x[1] for x in v], fmt='.0f'):>22s}")  # fmt: skip
    base_name = next((k for k in medians if k.startswith("infctl")), None)
    if base_name and medians[base_name]:
        base = medians[base_name]
        print(f"per-core throughput relative to {base_name}: "
              + ", ".join(f"{k} {v / base:.2f}x" for k, v in medians.items()))  # fmt: skip
    return rows


def all_routers(
    engine: str,
    peers_bin: Path | None,
    policies: list[str],
    peers: bool,
    loops: list[str],
    clients: list[str],
    servers: list[str] | None = None,
    baseline: Path | None = None,
) -> list[Router]:
    """infctl (once per event loop in ``loops``, upstream client in ``clients`` and front in ``servers``,
    and each of those once more on the package in ``baseline``) and the peers, each with every policy in
    ``policies``."""
    servers = servers or ["lean"]
    trees: list[Path | None] = [None, baseline] if baseline else [None]
    out: list[Router] = []
    for policy in policies:
        for r in routers([engine], peers_bin, [policy], peers):
            if r.name.startswith("infctl"):
                for loop, client, server, tree in itertools.product(loops, clients, servers, trees):
                    if server == "aiohttp" and client != "aiohttp" and "aiohttp" in clients:
                        continue  # aiohttp's server runs aiohttp's client whatever the flag: one row
                    port = free_port()
                    argv = [*r.argv, "--loop", loop, "--upstream-client", client, "--server", server]
                    if TOKENIZER:
                        argv += ["--tokenizer", TOKENIZER]
                    argv[argv.index("--port") + 1] = str(port)
                    if tree is not None:
                        # -P: without it ``python -m`` puts the working directory (this checkout)
                        # ahead of PYTHONPATH, and the baseline rows ran this tree's code.
                        argv = ["env", f"PYTHONPATH={tree}", argv[0], "-P", *argv[1:]]
                    axes = ((loop, loops), (client, clients), (f"{server} server", servers))
                    tags = [t for t, values in axes if len(values) > 1] + (["baseline"] if tree else [])
                    name = f"{r.name} [{', '.join(tags)}]" if tags else r.name
                    out.append(Router(name, argv, port))
                continue
            r.argv[r.argv.index("--policy") + 1] = policy
            at = r.argv.index("--worker-urls")
            r.argv[at:at] = ["--prometheus-port", str(free_port())]  # both default to 29000
            r.name = r.name.replace("cache_aware", policy)
            out.append(r)
    return out


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="40,80", help="comma-separated request rates for section 1")
    ap.add_argument(
        "--input-tokens",
        type=int,
        default=32,
        help="mean prompt length: tokens of --tokenizer when it is a real one, else words",
    )
    ap.add_argument("--tokenizer", help="infctl's --tokenizer; 'kit': tests/tokenizerkit.py's real BPE")
    ap.add_argument("--seconds", type=float, default=3.0, help="load per target per rate per round")
    ap.add_argument("--rounds", type=int, default=6, help="short interleaved rounds spread the noise")
    ap.add_argument(
        "--repeat", type=int, default=1, help="measure each section N times: medians, spread, head to head"
    )
    ap.add_argument("--output", choices=("text", "json"), default="text", help="json: figures at the end")
    ap.add_argument("--upstream", choices=("sim", "null"), default="sim", help="engine of section 1")
    ap.add_argument("--policies", default="round_robin,cache_aware", help="router policies (all routers)")
    ap.add_argument("--concurrency", type=int, default=48, help="streams in flight in section 2 (0: skip)")
    ap.add_argument("--saturation-seconds", type=float, default=8.0)
    ap.add_argument("--null-itl-ms", type=float, default=1.0, help="null upstream: delay between chunks")
    ap.add_argument(
        "--null-ttft-ms",
        type=float,
        default=0.0,
        help="null upstream of section 1: delay before the first chunk (section 2's is always 0)",
    )
    ap.add_argument("--no-peers", action="store_true", help="infctl only")
    ap.add_argument("--loops", default="auto", help="infctl event loops, a row each: auto, uvloop, asyncio")
    ap.add_argument(
        "--upstream-clients", default="lean", help="infctl upstream clients, a row each: lean, aiohttp"
    )
    ap.add_argument(
        "--servers", default="lean", help="infctl stacks, a row each: lean (front and client), aiohttp (both)"
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        help="a directory holding an infctl package (the code before a change): each infctl row again on it",
    )
    ap.add_argument(
        "--peers-bin",
        type=Path,
        default=Path(os.environ.get("INFCTL_PEERS_BIN", Path.home() / ".cache/infctl/peers-venv/bin")),
    )
    ap.add_argument("--serve-null", type=int, help=argparse.SUPPRESS)
    return ap.parse_args()


async def main(args: argparse.Namespace) -> None:
    global INPUT_TOKENS, TOKENIZER
    INPUT_TOKENS, TOKENIZER = args.input_tokens, args.tokenizer
    if TOKENIZER == "kit":
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
        from tokenizerkit import build_tokenizer

        TOKENIZER = str(build_tokenizer(Path(tempfile.mkdtemp(prefix="bench-tokenizer-"))))
    unit = "tokens of that tokenizer" if prompt_tokenizer() else "words"
    print(f"prompts: ~{INPUT_TOKENS} {unit}; infctl tokenizer: {TOKENIZER or 'auto (estimate)'}")
    policies = [p for p in args.policies.split(",") if p]
    rates = [float(r) for r in args.rates.split(",") if r]
    upstreams: list[subprocess.Popen[bytes]] = []
    started: list[Router] = []
    report: dict[str, object] = {"args": {k: str(v) for k, v in vars(args).items()}}
    try:
        sections = [("fixed", args.upstream)] if rates else []
        if args.concurrency:
            sections.append(("saturation", "null"))
        for section, kind in sections:
            proc, engine = start_upstream(
                kind, args.null_itl_ms, args.null_ttft_ms if section == "fixed" else 0.0
            )
            upstreams.append(proc)
            rs = all_routers(
                engine,
                args.peers_bin,
                policies,
                not args.no_peers,
                args.loops.split(","),
                args.upstream_clients.split(","),
                args.servers.split(","),
                args.baseline,
            )
            for r in rs:
                r.start()
                started.append(r)
            if section == "fixed":
                targets = [("direct", engine), *((r.name, r.url) for r in rs)]
                fixed = await fixed_rates(targets, rates, args.seconds, args.rounds, args.repeat)
                print_verdicts(fixed)
                report["fixed"] = {str(rate): figs for rate, (figs, _) in fixed.items()}
                report["paired"] = paired_report(fixed)
            else:
                report["saturation"] = await saturation(
                    rs, {r.name: r.url for r in rs}, args.concurrency, args.saturation_seconds, args.repeat
                )
            exits = []
            for r in rs:
                t0 = time.perf_counter()
                r.stop()
                exits.append(f"{r.name} {time.perf_counter() - t0:.2f}")
            started.clear()
            print(f"SIGTERM to exit (s), nothing in flight ({section}): " + ", ".join(exits), flush=True)
        if args.output == "json":
            print(json.dumps(report))
    finally:
        for r in started:
            r.stop()
        for p in upstreams:
            p.terminate()
            p.wait(10)


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    cli_args = parse_args()
    if cli_args.serve_null:
        serve_null(cli_args.serve_null, cli_args.null_itl_ms, cli_args.null_ttft_ms)
    else:
        asyncio.run(main(cli_args))
