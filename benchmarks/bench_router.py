"""Routers side by side on the same simulated engines: hit rate, TTFT and balance per workload, one run.

    python benchmarks/bench_router.py [--requests 300] [--rate 16] [--peers-bin DIR] [--only WORKLOAD]
                                      [--repeat N]

Each workload gets its own `infctl sim --instances 4` process (real time, Llama-3-8B/H100 timing, KV events
on ZMQ); before each router's run the engines' prefix caches are emptied, so every router starts from the
same line. Rows: infctl round_robin (the baseline of the "vs RR" columns; "vs 1st" when --policy puts another
policy first), infctl cache_aware (approximate index), the same with the engines' KV events too (index
auto: events plus speculative entries, merged with the approximate index), sglang-router and vllm-router
cache_aware, and vllm-router kv_aware fed the same KV events (when the peers are installed:
--peers-bin or PATH). Above them, the requests' hit-rate ceilings on these engines (``infctl.router.ceiling``:
every block sent before; one pooled cache of the 4 engines' size under MIN eviction, a bound no router can
beat, which the "/MIN" column divides by; under LRU, the engines' own eviction, not a bound), then the greedy
full-knowledge baseline (``infctl.router.oracle`` replayed in the fluid model of these engines: true caches
and queues, no future; it minimises each request's TTFT, so it gives up hits and is no ceiling: Mooncake
35.8% where cache_aware reaches 37.2%).

vllm-router kv_aware (0.1.17) needs three things, all met here: ``--kv-event-source URL=tcp://...`` per
engine; events encoded as maps tagged under "type" (vLLM's form today, the sim's default; an array-encoded
event fails its whole batch); and the prompt's token ids, which it asks each engine's ``/tokenize`` for (the
sim answers with the ids its KV events carry). It matches a prompt to blocks by their token ids (it cannot
recompute an engine's block hashes). Under its row the benchmark prints what its own /metrics say it did
(prefix lookups that hit, prompts it could not tokenize), so a starved index shows as such, not as a number.

1. Shared prefixes (the demo's: 48 prefixes of 2k tokens, Zipf 0.6), 32k tokens of KV per engine.
2. The Mooncake trace shipped in data/ (x8 faster, prompts x0.25 so 128 tokens per hash id, all 3,993
   lines: its block reuse builds up over the trace, 5% in the first 400 lines, 64% over all), 256k tokens
   of KV per engine.
3. Mixed long/short (the demo's: 90% 256-token chats, 10% 7k-token documents; 3 alternating rounds of 500
   requests, medians of the rounds): short-request TTFT p50/p99 with one pool (least_load) against length
   buckets that give long prompts their own engine. Its engines run one process each, as real engines do:
   in one process they share an event loop, and the long engine's parsing would stall the short pool.

Hit rate is engine-side (the engines' own prefix-cache counters); max/fair is the busiest engine's uncached
prompt tokens over the fair share; "CPU s" is the CPU time (user + system) of the router's process tree
over the run, from /proc: on two shared cores it is time the engines and the client lose. After each
workload a verdict compares every infctl row with every peer on hit rate and TTFT p50/p99: the median
difference, "ahead" or "behind" only when every round of one side beats every round of the other, else
"noise". Everything shares this machine's two cores (client, routers, engines), so
absolute figures carry that noise; the ratios within one run are the point. Run to run, the Mooncake hit
rate moves by ~1 point and its TTFT p50 by ~13 ms: ``--repeat N`` runs N rounds (routers interleaved in
each round, so a slow spell of the machine hits every router of that round), prints each round and then
the medians. Router overhead is measured by
benchmarks/bench_router_overhead.py.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import httpx

from infctl.bench import BenchConfig, BenchResult, LoadPlan, Stage, TraceSpec, run_benchmark
from infctl.bench.metrics import summarize
from infctl.bench.scenarios import SHORT_MAX_TOKENS, Arm, bucketing_scenario, prefix_scenario
from infctl.bench.workloads import build_workload
from infctl.bench.workloads.mooncake import sample_trace
from infctl.bench.workloads.specs import WorkloadSpec
from infctl.router import Backend, RequestInfo, build_policy
from infctl.router.ceiling import Ceilings, ceilings
from infctl.router.oracle import oracle_replay
from infctl.router.replay import FluidModel, ReplayResult, TraceRequest
from infctl.tokens import token_ids

MODEL = "m"
ENGINES = 4
MOONCAKE = sample_trace()
WITH_EVENTS = json.dumps({"preset": "cache_aware", "index": "auto"})


def free_port(span: int = 1) -> int:
    """A port such that it and the next ``span - 1`` are free (the sim takes consecutive ports)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + span < 65000 and all(_free(base + i) for i in range(1, span)):
            return base


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01


def tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process and its live descendants, from /proc (0 where there is none):
    a router started through a launcher that spawns workers is counted whole, as a single process is."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rpartition(")")[2].split()
            total += (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass
class Router:
    name: str
    argv: list[str]
    port: int
    proc: subprocess.Popen[bytes] | None = None
    diagnose: Callable[[], str] | None = None
    """A note printed under the router's row, read while it still runs (its own metrics)."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_http(f"{self.url}/v1/models", self.proc)

    def cpu_s(self) -> float:
        """CPU seconds the router's process tree has used so far."""
        return tree_cpu_s(self.proc.pid) if self.proc is not None else 0.0

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def routers(
    engines: Sequence[str],
    peers_bin: Path | None,
    policies: Sequence[str],
    peers: bool,
    *,
    kv_events: Sequence[str] = (),
    labels: Sequence[str] = (),
) -> list[Router]:
    """infctl routers (one per policy: a preset or JSON) then the peers' cache_aware (and, given the
    engines' KV-event endpoints, vllm-router's kv_aware fed by them). Policies on the precise or auto
    index get each backend's KV-event endpoint."""
    # The simulated engines count whitespace words; the router must count as they do (as the local target
    # sets it up), or the events' blocks never match its own (the estimate's) and index auto is approx alone.
    py = [sys.executable, "-m", "infctl", "router", "--engine", "vllm", "--tokenizer", "words"]
    out: list[Router] = []
    for i, policy in enumerate(policies):
        port = free_port()
        precise = bool(kv_events) and _index(policy) in ("precise", "auto")
        events = _pad(kv_events, engines)
        specs = [f"{u},kv_events={e}" if precise else u for u, e in zip(engines, events, strict=True)]
        backends = [a for spec in specs for a in ("--backend", spec)]
        label = labels[i] if i < len(labels) else policy if len(policy) < 20 else policy[:17] + "..."
        name = f"infctl {label}"
        if any(r.name == name for r in out):  # the same policy twice (an A/A check of the noise)
            name = f"{name} #{sum(r.name.startswith(name) for r in out) + 1}"
        argv = [*py, "--port", str(port), "--policy", policy, *backends]
        out.append(Router(name, argv, port, diagnose=functools.partial(decisions_note, port)))
    for name in ("sglang-router", "vllm-router") if peers else ():
        exe = str(peers_bin / name) if peers_bin and (peers_bin / name).exists() else shutil.which(name)
        if not exe:
            print(f"({name} not installed: skipped)")
            continue
        port = free_port()
        # Both export metrics on 29000 by default and exit at start when it is taken (by another peer
        # router, e.g. the peers test stage's): a free port each, as test_peer_routers.py does.
        common = ["--host", "127.0.0.1", "--port", str(port), "--policy", "cache_aware",
                  "--prometheus-host", "127.0.0.1", "--prometheus-port", str(free_port()),
                  "--worker-urls", *engines]  # fmt: skip
        argv = [exe, "launch", *common] if name == "sglang-router" else [exe, *common]
        out.append(Router(f"{name} cache_aware", argv, port))
        if name == "vllm-router" and kv_events:
            out.append(_vllm_kv_aware(exe, engines, kv_events))
    return out


def _vllm_kv_aware(exe: str, engines: Sequence[str], kv_events: Sequence[str]) -> Router:
    port, metrics = free_port(), free_port()
    sources = [a for u, e in zip(engines, kv_events, strict=True) for a in ("--kv-event-source", f"{u}={e}")]
    argv = [exe, "--host", "127.0.0.1", "--port", str(port),
            "--prometheus-host", "127.0.0.1", "--prometheus-port", str(metrics),
            "--policy", "kv_aware", "--worker-urls", *engines, *sources,
            "--kv-event-block-size", "16", "--kv-event-model", MODEL]  # fmt: skip
    return Router("vllm-router kv_aware", argv, port, diagnose=lambda: kv_aware_note(metrics))


def kv_aware_note(metrics_port: int) -> str:
    """What vllm-router's kv_aware did, from its /metrics: prefix lookups by result, prompt tokenizations."""
    try:
        text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text
    except httpx.HTTPError as exc:
        return f"  (vllm-router kv_aware: no /metrics to check its index: {exc})"
    lookups = _counter(text, "vllm_router_kv_placement_lookups_total", "result")
    inputs = _counter(text, "vllm_router_kv_routing_inputs_total", "result")
    total = sum(lookups.values())
    seen = ", ".join(f"{k} {v:.0f}" for k, v in sorted(lookups.items())) or "none"
    note = f"  (vllm-router kv_aware prefix lookups: {seen}; prompt inputs: "
    note += ", ".join(f"{k} {v:.0f}" for k, v in sorted(inputs.items())) + ")"
    if not lookups.get("hit"):
        why = (
            "it could not tokenize the prompts (no /tokenize answer from the engines)"
            if lookups.get("missing_tokens", 0) >= total / 2
            else "its index never matched: no decodable KV events (map-encoded, on --kv-event-source)"
        )
        note += f"\n  DEGRADED: the kv_aware row routed without prefix knowledge: {why}"
    return note


def decisions_note(port: int) -> str:
    """An infctl router's routing decisions by reason, from its /metrics (bench_policies' replay prints the
    same reasons, so a live run that diverts more than the replay shows here)."""
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    except httpx.HTTPError as exc:
        return f"  (no /metrics: {exc})"
    reasons = _counter(text, "infctl_router_decisions_total", "reason")
    note = "  decisions: " + (", ".join(f"{k} {v:.0f}" for k, v in sorted(reasons.items())) or "none")
    batches = _plain(text, "infctl_router_kv_event_batches_total")
    if batches is not None:  # 0 unless the index is precise/auto: whether the engines' events arrived
        missed = _plain(text, "infctl_router_kv_event_batches_missed_total") or 0.0
        note += f"; KV event batches applied {batches:.0f}, missed {missed:.0f}"
    return note


def _plain(text: str, name: str) -> float | None:
    """The value of an unlabelled Prometheus sample, None when the router does not export it."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def _counter(text: str, name: str, label: str) -> dict[str, float]:
    """Values of one Prometheus counter by one label, summed over the others."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels, _, value = line[len(name) + 1 :].rpartition("} ")
            for pair in labels.split(","):
                key, _, val = pair.partition("=")
                if key == label:
                    out[val.strip('"')] = out.get(val.strip('"'), 0.0) + float(value)
    return out


def _index(policy: str) -> str:
    config = json.loads(policy) if policy.lstrip().startswith("{") else policy
    return build_policy(config).index


def _pad(items: Sequence[str], like: Sequence[str]) -> list[str]:
    return [items[i] if i < len(items) else "" for i in range(len(like))]


@dataclass
class Sim:
    """``ENGINES`` simulated engines publishing KV events: one ``infctl sim`` process, or one process each."""

    blocks: int
    """KV blocks of 16 tokens per engine."""
    separate: bool = False
    """One process per engine, as real engines are: the engines of one process share its event loop, so a
    long prompt's parsing on one engine stalls the others (what length bucketing is meant to isolate)."""
    encoding: str = "map"
    """How the engines encode KV events: "map" as vLLM does today (the only form vllm-router reads) or
    "array" as older vLLM did (infctl reads both)."""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    engines: tuple[str, ...] = ()
    kv_events: tuple[str, ...] = ()

    def __enter__(self) -> Sim:
        port, kv = free_port(ENGINES), free_port(ENGINES)
        groups = [(i, 1) for i in range(ENGINES)] if self.separate else [(0, ENGINES)]
        for first, n in groups:
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "infctl", "sim", "--instances", str(n), "--port", str(port + first),
                 "--model", MODEL, "--num-gpu-blocks", str(self.blocks), "--max-model-len", "32768",
                 "--kv-events-port", str(kv + first), "--kv-events-encoding", self.encoding,
                 "--server-dev-mode"],  # /reset_prefix_cache, as vLLM serves it only in dev mode
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))  # fmt: skip
        self.engines = tuple(f"http://127.0.0.1:{port + i}" for i in range(ENGINES))
        self.kv_events = tuple(f"tcp://127.0.0.1:{kv + i}" for i in range(ENGINES))
        for i, u in enumerate(self.engines):
            wait_http(f"{u}/health", self.procs[i if self.separate else 0])
        return self

    def __exit__(self, *_: object) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(10)


async def reset(engines: Sequence[str]) -> None:
    async with httpx.AsyncClient(timeout=10) as c:
        for u in engines:
            await c.post(f"{u}/reset_prefix_cache")


async def bench(
    url: str, engines: Sequence[str], workload: WorkloadSpec, load: LoadPlan, label: str
) -> BenchResult:
    await reset(engines)
    cfg = BenchConfig(
        url=url, model=MODEL, workload=workload, load=load, seed=1, engine_urls=list(engines), label=label
    )
    return await run_benchmark(cfg)


def balance(r: BenchResult) -> float:
    """Busiest engine's uncached prompt tokens over the fair share (1.0 = even)."""
    if r.server is None or not r.server.engines:
        return float("nan")
    work = [e.prompt_tokens - e.prefix_hits for e in r.server.engines]
    total = sum(work)
    return max(work) * len(work) / total if total else float("nan")


def oracle_run(workload: WorkloadSpec, plan: LoadPlan, blocks: int) -> tuple[ReplayResult, Ceilings]:
    """The greedy full-knowledge baseline on the same requests (fluid model of the sim's engines and
    caches), and the requests' hit-rate ceilings on these engines (``infctl.router.ceiling``)."""
    stage = plan.stages[0]
    rng = random.Random(1)
    specs = build_workload(workload, "completions", seed=1).requests()
    trace, now = [], 0.0
    for i, spec in enumerate(islice(specs, stage.num_requests) if stage.num_requests else specs):
        now = spec.at_s if spec.at_s is not None else now + rng.expovariate(stage.rate or 1.0)
        ids = token_ids(spec.prompt or "")
        trace.append(TraceRequest(now, RequestInfo.from_ids(f"o{i}", ids, model=MODEL), spec.max_tokens))
    model = FluidModel(
        prefill_tokens_per_s=1e6 / 17.25, tpot_s=0.006, cache_tokens=blocks * 16, engine_cache=True
    )
    greedy = oracle_replay([Backend(f"e{i}") for i in range(ENGINES)], trace, model)
    return greedy, ceilings([t.request for t in trace], ENGINES, blocks)


def header(base: str = "RR") -> str:
    """The column titles; ``base`` names the first row, which the "vs" columns compare against."""
    return (
        f"{'router':27s} {'hit':>6s} {'/MIN':>7s} {'TTFT p50':>8s} {'vs ' + base:>6s} {'p99 ms':>7s} "
        f"{'vs ' + base:>6s} {'out tok/s':>9s} {'max/fair':>8s} {'failed':>6s} {'CPU s':>6s}"
    )


@dataclass(frozen=True)
class Run:
    """One router's figures from one bench run (hit rate None when the engines report no counters)."""

    hit: float | None
    p50_s: float
    p99_s: float
    out_tok_s: float
    balance: float
    failed: int
    cpu_s: float = float("nan")
    """CPU seconds (user + system) the router's process tree used over the run: these routers share two
    cores with the engines and the client, so a router's CPU is time the engines do not get."""

    @classmethod
    def of(cls, r: BenchResult, cpu_s: float = float("nan")) -> Run:
        s = r.summary
        hit = r.server.hit_rate if r.server else None
        return cls(hit, s.ttft["p50"], s.ttft["p99"], s.output_throughput, balance(r), s.failed, cpu_s)


def median_run(runs: Sequence[Run]) -> Run:
    """Per-column medians over rounds (failures summed): one stall of the shared machine moves one round."""
    hits = [r.hit for r in runs if r.hit is not None]

    def med(xs: Sequence[float]) -> float:
        return statistics.median(xs)

    return Run(
        med(hits) if hits else None,
        med([r.p50_s for r in runs]),
        med([r.p99_s for r in runs]),
        med([r.out_tok_s for r in runs]),
        med([r.balance for r in runs]),
        sum(r.failed for r in runs),
        med([r.cpu_s for r in runs]),
    )


def spread(runs: Sequence[Run]) -> str:
    """Each round's hit rate and TTFT p50/p99, so a difference can be weighed against the noise."""
    return "  rounds: " + ", ".join(
        f"{(r.hit or 0) * 100:.1f}% {r.p50_s * 1e3:.0f}/{r.p99_s * 1e3:.0f} ms {r.cpu_s:.1f} CPU s"
        for r in runs
    )


def compare(ours: Sequence[float], theirs: Sequence[float], lower_is_better: bool) -> str:
    """ "ahead" or "behind" when every round of one side beats every round of the other, else "noise"
    (with one round each, a single run's difference cannot be told from noise)."""
    if len(ours) < 2 or len(theirs) < 2:
        return "1 round: noise unknown"
    sign = -1.0 if lower_is_better else 1.0
    if min(sign * x for x in ours) > max(sign * y for y in theirs):
        return "ahead"
    if max(sign * x for x in ours) < min(sign * y for y in theirs):
        return "behind"
    return "noise"


def verdict(runs: dict[str, list[Run]]) -> str:
    """Each infctl row against each peer row: median differences and whether the rounds separate them."""
    ours = [n for n in runs if n.startswith("infctl") and "round_robin" not in n and runs[n]]
    peers = [n for n in runs if not n.startswith("infctl") and runs[n]]
    lines = ["verdict (medians; ahead/behind: every round of one beats every round of the other):"]
    for a in ours:
        for b in peers:
            ra, rb = runs[a], runs[b]
            ha, hb = [(r.hit or 0) * 100 for r in ra], [(r.hit or 0) * 100 for r in rb]
            parts = [
                f"hit {statistics.median(ha) - statistics.median(hb):+.1f} pt ({compare(ha, hb, False)})"
            ]
            for label, xa, xb in (
                ("TTFT p50", [r.p50_s * 1e3 for r in ra], [r.p50_s * 1e3 for r in rb]),
                ("p99", [r.p99_s * 1e3 for r in ra], [r.p99_s * 1e3 for r in rb]),
            ):
                diff = statistics.median(xa) - statistics.median(xb)
                parts.append(f"{label} {diff:+.0f} ms ({compare(xa, xb, True)})")
            lines.append(f"  {a} vs {b}: " + ", ".join(parts))
    return "\n".join(lines) if len(lines) > 1 else ""


def _vs(x: float, base: float | None) -> str:
    return f"{(x - base) / base * 100:+5.0f}%" if base else "     -"


def quality_row(name: str, r: Run, bound: float | None, rr: Run | None) -> str:
    """One router's figures; ``bound`` is the pooled-MIN hit rate the "/MIN" column divides by."""
    hit = r.hit
    ratio = f"{hit / bound:7.2f}" if hit is not None and bound else "    n/a"
    return (
        f"{name:27s} {('%.1f%%' % (hit * 100)) if hit is not None else 'n/a':>6s} {ratio} "
        f"{r.p50_s * 1e3:8.0f} {_vs(r.p50_s, rr.p50_s if rr else None)} {r.p99_s * 1e3:7.0f} "
        f"{_vs(r.p99_s, rr.p99_s if rr else None)} {r.out_tok_s:9.0f} {r.balance:8.2f} {r.failed:6d} "
        f"{r.cpu_s:6.1f}"
    )


def oracle_row(o: ReplayResult, bound: float) -> str:
    """The greedy full-knowledge baseline: true caches and queues, no future, TTFT-first (not a ceiling)."""
    name, model, share = "greedy, true caches", "(fluid model)", o.max_share(ENGINES)
    return f"{name:27s} {o.hit_rate * 100:5.1f}% {o.hit_rate / bound:7.2f} {model:>34s} {share:18.2f}"


async def quality(
    title: str, sim: Sim, workload: WorkloadSpec, plan: LoadPlan, rs: Sequence[Router], repeat: int = 1
) -> None:
    """Every router over the workload, ``repeat`` rounds with the routers interleaved in each round; with
    several rounds each column is the median and each round's figures are printed under the row."""
    greedy, ceiling = oracle_run(workload, plan, sim.blocks)
    bound = ceiling.rate(ceiling.pooled_min)
    rounds = f", median of {repeat} interleaved rounds" if repeat > 1 else ""
    base = "RR" if rs and "round_robin" in rs[0].name else "1st"
    print(f"\n== {title}: {ENGINES} engines, {sim.blocks * 16} tokens of KV each{rounds} ==")
    print(f"{ceiling.describe()}\n{header(base)}")
    print(oracle_row(greedy, bound), flush=True)
    runs: dict[str, list[Run]] = {r.name: [] for r in rs}
    notes: dict[str, str] = {}
    for k in range(repeat):
        for r in rs:
            try:
                r.start()
            except RuntimeError as exc:
                print(f"{r.name:27s} did not start ({exc})")
                continue
            try:
                cpu0 = r.cpu_s()
                res = await bench(r.url, sim.engines, workload, plan, r.name)
                cpu = r.cpu_s() - cpu0
                note = r.diagnose() if r.diagnose else None
            finally:
                r.stop()
            runs[r.name].append(Run.of(res, cpu))
            if note and repeat == 1:
                notes[r.name] = note
            if repeat > 1:
                print(f"  (round {k + 1}/{repeat}) {quality_row(r.name, runs[r.name][-1], bound, None)}",
                      flush=True)  # fmt: skip
                if note:
                    print(f"  {note}", flush=True)
            else:
                _print_row(r.name, runs, bound, rs, notes)
    if repeat > 1:
        print("medians:")
        for r in rs:
            _print_row(r.name, runs, bound, rs, notes)
    print(verdict(runs), flush=True)


def _print_row(
    name: str, runs: dict[str, list[Run]], bound: float, rs: Sequence[Router], notes: dict[str, str]
) -> None:
    got = runs[name]
    if not got:
        return
    base = next((median_run(runs[r.name]) for r in rs if runs[r.name]), None)
    print(quality_row(name, median_run(got), bound, base), flush=True)
    if len(got) > 1:
        print(spread(got), flush=True)
    if name in notes:
        print(notes[name], flush=True)


async def mixed(sim: Sim, requests: int, rate: float, rounds: int) -> None:
    """Length bucketing as ``infctl demo`` runs it: 90% short, 10% long; one pool vs a long-prompt pool.

    The arms alternate over ``rounds`` rounds and each column is the median of the rounds: a stall of this
    shared machine lands in one round of one arm instead of deciding a p99."""
    sc = bucketing_scenario(ENGINES, requests=requests, rate=rate)
    print(f"\n== {sc.name}: {ENGINES} engines, median of {rounds} alternating rounds ==")
    cols = ("short p50", "short p99", "vs one pool", "long p99", "failed", "short p99 per round")
    print(f"{'router':27s} " + " ".join(f"{c:>{max(8, len(c))}s}" for c in cols[:-1]) + f"  {cols[-1]}")
    arms = [(arm, _mixed_router(sim, arm)) for arm in (sc.baseline, sc.infctl)]
    rows: dict[str, list[tuple[float, float, float, int]]] = {r.name: [] for _, r in arms}
    for _ in range(rounds):
        for _arm, r in arms:
            r.start()
            try:
                res = await bench(r.url, sim.engines, sc.workload, sc.load, r.name)
            finally:
                r.stop()
            short = summarize([x for x in res.requests if x.input_tokens <= SHORT_MAX_TOKENS]).ttft
            long = summarize([x for x in res.requests if x.input_tokens > SHORT_MAX_TOKENS]).ttft
            rows[r.name].append((short["p50"], short["p99"], long["p99"], res.summary.failed))
    base: float | None = None
    for name, got in rows.items():
        p50, p99, long_p99 = (statistics.median(g[i] for g in got) for i in range(3))
        base = base or p99
        per_round = " ".join(f"{g[1] * 1e3:.0f}" for g in got)
        print(
            f"{name:27s} {p50 * 1e3:9.0f} {p99 * 1e3:9.0f} {_vs(p99, base):>11s} {long_p99 * 1e3:8.0f} "
            f"{sum(g[3] for g in got):8d}  {per_round}",
            flush=True,
        )


def _mixed_router(sim: Sim, arm: Arm) -> Router:
    pools = [f",pool={p}" if p else "" for p in _pad([p or "" for p in arm.pools], sim.engines)]
    policy = arm.policy if isinstance(arm.policy, str) else json.dumps(arm.policy)
    port = free_port()
    backends = [a for u, p in zip(sim.engines, pools, strict=True) for a in ("--backend", u + p)]
    argv = [sys.executable, "-m", "infctl", "router", "--engine", "vllm", "--tokenizer", "words",
            "--port", str(port), "--policy", policy, *backends]  # fmt: skip
    return Router(arm.label if arm.label.startswith("infctl") else f"infctl {arm.label}", argv, port)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--rate", type=float, default=16.0)
    ap.add_argument(
        "--peers-bin",
        type=Path,
        default=Path(os.environ["INFCTL_PEERS_BIN"]) if "INFCTL_PEERS_BIN" in os.environ else None,
    )
    ap.add_argument(
        "--mooncake", type=Path, default=MOONCAKE, help="Mooncake-format trace (default: data/'s)"
    )
    ap.add_argument("--mooncake-requests", type=int, default=0, help="first N lines (default: all)")
    ap.add_argument("--mooncake-speedup", type=float, default=8.0, help="time compression of the trace")
    ap.add_argument(
        "--mixed-requests", type=int, default=500, help="requests per round of the mixed long/short run"
    )
    ap.add_argument("--mixed-rounds", type=int, default=3, help="alternating rounds of the mixed run")
    ap.add_argument("--policy", action="append", help="infctl policies to run (preset or JSON); repeatable")
    ap.add_argument("--no-peers", action="store_true", help="skip sglang-router and vllm-router")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="rounds of the shared and Mooncake runs, routers interleaved in each round; columns are the "
        "medians and each round is printed (a 1-point hit-rate gap needs 2-3 rounds: ~1 point of noise)",
    )
    ap.add_argument(
        "--kv-events-encoding",
        choices=["map", "array"],
        default="map",
        help="the engines' KV event encoding: map (vLLM today; the default) or array (older vLLM, which "
        "vllm-router cannot decode: its kv_aware row then shows DEGRADED)",
    )
    ap.add_argument("--only", choices=["shared", "mooncake", "mixed"], action="append", help="run only these")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the engines and routers on the way out

    policies = args.policy or ["round_robin", "cache_aware", WITH_EVENTS]
    labels = [] if args.policy else ["round_robin", "cache_aware", "cache_aware + KV events"]
    only = set(args.only or ["shared", "mooncake", "mixed"])
    if "shared" in only:
        with Sim(blocks=2048, encoding=args.kv_events_encoding) as sim:
            rs = routers(sim.engines, args.peers_bin, policies, not args.no_peers,
                         kv_events=sim.kv_events, labels=labels)  # fmt: skip
            load = LoadPlan(stages=[Stage(rate=args.rate, num_requests=args.requests)], warmup=20)
            await quality("shared prefixes (the demo's)", sim, prefix_scenario(ENGINES).workload, load, rs,
                          args.repeat)  # fmt: skip
    if "mooncake" in only and args.mooncake.exists():
        with Sim(blocks=16384, encoding=args.kv_events_encoding) as sim:
            rs = routers(sim.engines, args.peers_bin, policies, not args.no_peers,
                         kv_events=sim.kv_events, labels=labels)  # fmt: skip
            x = args.mooncake_speedup
            trace = TraceSpec(
                path=args.mooncake, time_compression=x, input_scale=0.25, max_input_tokens=16000
            )
            plan = LoadPlan(stages=[Stage(num_requests=args.mooncake_requests or None)])
            title = f"Mooncake trace (x{x:g} faster, prompts x0.25)"
            await quality(title, sim, trace, plan, rs, args.repeat)
    if "mixed" in only:
        with Sim(blocks=2048, separate=True) as sim:
            await mixed(sim, args.mixed_requests, args.rate, args.mixed_rounds)


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    asyncio.run(main())
