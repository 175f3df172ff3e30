"""How fast infctl reads a vLLM /metrics payload, measured side by side in one run.

    python benchmarks/bench_metrics_parse.py [--engines 4] [--fleet 64] [--period-ms 100]
    flock /tmp/infctl-bench.lock python benchmarks/bench_metrics_parse.py --idle-seconds 60

Builds a realistic vLLM payload (every family infctl knows, histograms with vLLM's real buckets, one
label set per data-parallel engine, prometheus_client's ``_created`` samples and process metrics), then
times: the full parse, the filtered parse the router does (the adapter's signal names), filtered parse
plus ``signals()``, prometheus_client's parser when importable, and a whole ``scrape_many`` round over
an ``httpx.MockTransport`` (client machinery included, sockets not). Then the CPU of one engine scraped
over a real socket (parse and signals included) three ways: httpx's client and transport, httpx's client
over the router's lean pool (``LeanTransport``, the router's path until it moved), and the bare GET the
router scrapes through (``EngineGet``: ``fetch`` on the lean pool). Prints the implied share of one core
for a fleet scraped every period.

``--idle-seconds N`` (live: take the lock) adds an idle router's CPU: ``infctl sim`` with 4 engines, and
two routers in front of them scraping every 100 ms, one through the bare GET and one through httpx's
client over the lean pool (the old path), both running through the same N seconds; reported as each
process's CPU seconds (utime + stime, from /proc) and share of one core, and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from infctl.engines import vllm
from infctl.router.fetch import EngineGet, FetchError, fetch
from infctl.router.http1 import Http1Pool, Http1Settings
from infctl.telemetry import make_client, parse_metrics, scrape, scrape_many
from infctl.telemetry.scrape import Client, HttpxGet

_HTTPX_ERRORS: dict[str, type[httpx.TransportError]] = {
    "connect": httpx.ConnectError,
    "connect_timeout": httpx.ConnectTimeout,
    "timeout": httpx.ReadTimeout,
    "read": httpx.ReadError,
    "protocol": httpx.RemoteProtocolError,
}


class LeanTransport(httpx.AsyncBaseTransport):
    """httpx's client over the router's lean pool: how the router scraped before ``EngineGet`` (the old
    path this benchmark compares with). Plain HTTP only."""

    def __init__(self, pool: Http1Pool) -> None:
        self.pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        read = (request.extensions.get("timeout") or {}).get("read")
        try:
            answer = await fetch(
                self.pool,
                request.method,
                str(request.url),
                body=await request.aread(),
                headers=request.headers,
                read_timeout_s=read,
            )
        except FetchError as exc:
            raise _HTTPX_ERRORS[exc.stage](str(exc), request=request) from exc
        headers = [(k, v) for k, v in answer.headers.items() if k != "transfer-encoding"]
        return httpx.Response(answer.status, headers=headers, content=answer.body, request=request)


MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def build_payload(engines: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    out = [
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        "process_resident_memory_bytes 2.142212096e+09",
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        *(
            f'python_gc_objects_collected_total{{generation="{g}"}} {rng.randint(0, 9999)}.0'
            for g in range(3)
        ),
    ]

    def labels(e: int, **extra: str) -> str:
        pairs = {"engine": str(e), "model_name": MODEL, **extra}
        return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"

    def family(name: str, kind: str, lines: list[str]) -> None:
        out.append(f"# HELP {name} {name.split(':')[1].replace('_', ' ')}.")
        out.append(f"# TYPE {name} {kind}")
        out.extend(lines)

    for g in (vllm.NUM_REQUESTS_RUNNING, vllm.NUM_REQUESTS_WAITING, vllm.KV_CACHE_USAGE_PERC):
        family(g, "gauge", [f"{g}{labels(e)} {rng.random() * 10:.1f}" for e in range(engines)])
    family(
        vllm.NUM_REQUESTS_WAITING_BY_REASON,
        "gauge",
        [
            f"{vllm.NUM_REQUESTS_WAITING_BY_REASON}{labels(e, reason=r)} 0.0"
            for e in range(engines)
            for r in ("capacity", "deferred")
        ],
    )
    for c in (
        vllm.PREFIX_CACHE_QUERIES,
        vllm.PREFIX_CACHE_HITS,
        vllm.PROMPT_TOKENS,
        vllm.GENERATION_TOKENS,
        vllm.NUM_PREEMPTIONS,
    ):
        family(c, "counter", [f"{c}{labels(e)} {rng.randint(0, 10**8)}.0" for e in range(engines)])
        created = c.removesuffix("_total") + "_created"
        family(created, "gauge", [f"{created}{labels(e)} 1.7325e+09" for e in range(engines)])
    family(
        vllm.REQUEST_SUCCESS,
        "counter",
        [
            f"{vllm.REQUEST_SUCCESS}{labels(e, finished_reason=r)} {rng.randint(0, 10**5)}.0"
            for e in range(engines)
            for r in ("stop", "length", "abort")
        ],
    )
    buckets = vllm.bucket_bounds(131072)
    for h in vllm.HISTOGRAMS:
        lines = []
        for e in range(engines):
            running = 0
            for le in buckets[h]:
                running += rng.randint(0, 500)
                lines.append(f'{h}_bucket{{engine="{e}",le="{le!r}",model_name="{MODEL}"}} {running}.0')
            lines.append(f'{h}_bucket{{engine="{e}",le="+Inf",model_name="{MODEL}"}} {running}.0')
            lines.append(f"{h}_count{labels(e)} {running}.0")
            lines.append(f"{h}_sum{labels(e)} {running * 0.37:.3f}")
        family(h, "histogram", lines)
        family(h + "_created", "gauge", [f"{h}_created{labels(e)} 1.7325e+09" for e in range(engines)])
    family(
        vllm.CACHE_CONFIG_INFO,
        "gauge",
        [
            f'{vllm.CACHE_CONFIG_INFO}{{block_size="16",cache_dtype="auto",enable_prefix_caching="True",'
            f'engine="{e}",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="29000",'
            f'sliding_window="None"}} 1.0'
            for e in range(engines)
        ],
    )
    return "\n".join(out) + "\n"


def per_call_us(fn: Callable[[], object], budget_s: float = 0.6, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean time per call, each round running for about ``budget_s``."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    number = max(1, int(budget_s / rounds / once))
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples) * 1e6


OLD_PATH = "httpx over LeanTransport (old router)"
NEW_PATH = "EngineGet, bare fetch (router)"


async def over_a_socket(payload: bytes, adapter: vllm.VLLMAdapter) -> list[tuple[str, float]]:
    """CPU per scrape of one engine over a real local keep-alive connection: by httpx's own transport,
    by httpx's client over the lean pool and by the bare GET, in interleaved rounds. The server is a
    canned answer written from ``data_received`` in this process (the same work for every row), so what
    differs between the rows is the client."""
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n" % len(payload)

    class Canned(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            if b"\r\n\r\n" in data:
                self.transport.write(answer + payload)  # type: ignore[attr-defined]

    server = await asyncio.get_running_loop().create_server(Canned, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    pool = Http1Pool()
    plain = make_client()
    clients: dict[str, Client] = {
        "httpx transport": plain,
        OLD_PATH: make_client(LeanTransport(pool)),
        NEW_PATH: EngineGet(pool, HttpxGet(plain), 2.0),
    }
    took: dict[str, list[float]] = {name: [] for name in clients}
    n = 200
    for _ in range(5):
        for name, client in clients.items():
            await scrape(client, url, adapter)  # warm: the connection is open
            start = time.process_time()
            for _ in range(n):
                await scrape(client, url, adapter)
            took[name].append((time.process_time() - start) / n * 1e6)
    await plain.aclose()
    await clients[OLD_PATH].aclose()  # type: ignore[union-attr]
    pool.close()
    server.close()
    return [(f"scrape over a socket, {name}", statistics.median(us)) for name, us in took.items()]


def idle_routers(seconds: float) -> None:
    """Two idle routers over the same 4 sim engines, one per scrape path, measured over the same
    ``seconds`` (see the module's docstring)."""
    here = Path(__file__).resolve().parent
    sys.path.insert(0, str(here))
    from bench_router import Sim, free_port, tree_cpu_s, wait_http

    with Sim(blocks=2048) as sim:
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            for name, old in ((OLD_PATH, True), (NEW_PATH, False)):
                port = free_port()
                argv = [sys.executable, __file__, "--serve-router", str(port), *sim.engines]
                argv += ["--old-path"] if old else []
                procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                wait_http(f"http://127.0.0.1:{port}/ready", procs[name])
            time.sleep(2.0)  # past start-up: imports, first connections
            before = {name: tree_cpu_s(p.pid) for name, p in procs.items()}
            start = time.monotonic()
            time.sleep(seconds)
            spent = {name: tree_cpu_s(p.pid) - before[name] for name, p in procs.items()}
            wall = time.monotonic() - start
        finally:
            for p in procs.values():
                p.terminate()
            for p in procs.values():
                p.wait(10)
    rounds = wall / 0.1
    print(f"\nidle router, {len(sim.engines)} sim engines scraped every 100 ms, {wall:.0f} s side by side:")
    for name, cpu in spent.items():
        per = cpu / (rounds * len(sim.engines)) * 1e6
        print(f"  {name:<40} {cpu:6.2f} CPU s  {cpu / wall * 100:5.2f}% of one core  {per:6.0f} us/scrape")
    print(f"  bare / old                               {spent[NEW_PATH] / spent[OLD_PATH]:6.3f}")
    print("  (us/scrape: the whole process's CPU over the scrapes; health probes and the idle loop included)")


def serve_router(port: int, engines: list[str], old_path: bool) -> None:
    """A router in front of ``engines`` (a process of ``idle_routers``): scraping through the bare GET,
    or with ``old_path`` through httpx's client over the lean pool, as it did before."""
    from infctl.router.config import RouterConfig
    from infctl.router.server import loop_factory, serve
    from infctl.router.snapshot import Backend

    cfg = RouterConfig(backends=tuple(Backend(id=u, url=u) for u in engines), port=port)
    settings = Http1Settings(connect_timeout_s=cfg.connect_timeout_s, read_timeout_s=cfg.read_timeout_s)

    async def main() -> None:
        old = HttpxGet(make_client(LeanTransport(Http1Pool(settings)), timeout=1.0))
        await serve(cfg, scraper=old if old_path else None)

    with asyncio.Runner(loop_factory=loop_factory("auto")) as runner:
        runner.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", type=int, default=3, help="data-parallel engines (label sets) per payload")
    ap.add_argument("--fleet", type=int, default=64, help="engines scraped by one router core")
    ap.add_argument("--period-ms", type=float, default=100.0, help="scrape period")
    ap.add_argument(
        "--idle-seconds", type=float, default=0.0, help="also measure two idle routers this long (live)"
    )
    ap.add_argument("--serve-router", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--old-path", action="store_true", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.serve_router is not None:
        serve_router(args.serve_router, rest, args.old_path)
        return

    text = build_payload(args.engines)
    adapter = vllm.ADAPTER
    wanted = adapter.wanted_metrics
    scrapes_per_s = args.fleet * 1000.0 / args.period_ms

    def share(us: float) -> str:
        return f"{us * scrapes_per_s / 1e4:5.1f}% of one core"

    samples = sum(len(v) for v in parse_metrics(text).values())
    print(
        f"payload: {len(text.encode()) / 1024:.1f} KiB, {text.count(chr(10))} lines, {samples} samples, "
        f"{args.engines} vLLM engines; {len(parse_metrics(text, wanted))} signal families found"
    )
    print(f"fleet: {args.fleet} engines every {args.period_ms:g} ms = {scrapes_per_s:.0f} scrapes/s\n")

    unfiltered = per_call_us(lambda: parse_metrics(text))
    filtered = per_call_us(lambda: parse_metrics(text, wanted))
    with_signals = per_call_us(lambda: adapter.signals(parse_metrics(text, wanted)))
    rows = [
        ("parse_metrics, unfiltered", unfiltered),
        ("parse_metrics, filtered to signals", filtered),
        ("filtered parse + signals()", with_signals),
    ]
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        client_us = None
    else:
        client_us = per_call_us(lambda: [f.samples for f in text_string_to_metric_families(text)])
        rows.append(("prometheus_client parser (full)", client_us))

    payload = text.encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=payload))
    targets = {f"http://engine-{i}:8000": adapter for i in range(args.fleet)}

    async def one_round() -> None:
        async with make_client(transport) as client:
            await scrape_many(client, targets)  # warm-up
            start = time.perf_counter()
            rounds = 20
            for _ in range(rounds):
                await scrape_many(client, targets)
            elapsed = (time.perf_counter() - start) / rounds
        label = f"scrape_many of {args.fleet} via MockTransport, per engine"
        rows.append((label, elapsed / args.fleet * 1e6))

    asyncio.run(one_round())
    rows += asyncio.run(over_a_socket(payload, adapter))

    for label, us in rows:
        print(f"  {label:<62} {us:7.1f} us   {share(us)}")
    print()
    speedup = unfiltered / filtered
    print(f"  filtered / unfiltered                 {filtered / unfiltered:6.3f}  ({speedup:.1f}x faster)")
    over = dict(rows)
    plain, lean, bare = (
        over["scrape over a socket, httpx transport"],
        over[f"scrape over a socket, {OLD_PATH}"],
        over[f"scrape over a socket, {NEW_PATH}"],
    )
    print(f"  scrape over a socket, old / httpx     {lean / plain:6.3f}  (CPU; parse and signals included)")
    print(f"  scrape over a socket, bare / old      {bare / lean:6.3f}  (the router's path, now / before)")
    if client_us is not None:
        print(f"  prometheus_client / ours, unfiltered  {client_us / unfiltered:6.1f}x")
        print(f"  prometheus_client / ours, filtered    {client_us / filtered:6.1f}x")
    budget_us = 1500.0
    verdict = "within" if with_signals < budget_us else "OVER"
    print(f"  budget per payload (filtered+signals) {budget_us:.0f} us: {verdict} ({with_signals:.0f} us)")
    if args.idle_seconds > 0:
        idle_routers(args.idle_seconds)


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
