"""How fast infctl reads a vLLM /metrics payload, measured side by side in one run.

    python benchmarks/bench_metrics_parse.py [--engines 4] [--fleet 64] [--period-ms 100]

Builds a realistic vLLM payload (every family infctl knows, histograms with vLLM's real buckets, one
label set per data-parallel engine, prometheus_client's ``_created`` samples and process metrics), then
times: the full parse, the filtered parse the router does (the adapter's signal names), filtered parse
plus ``signals()``, prometheus_client's parser when importable, and a whole ``scrape_many`` round over
an ``httpx.MockTransport`` (client machinery included, sockets not), and one engine scraped over a real
socket by httpx's transport and by the router's lean one. Prints the implied share of one
core for a fleet scraped every period.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Callable

import httpx

from infctl.engines import vllm
from infctl.router.fetch import LeanTransport
from infctl.router.http1 import Http1Pool
from infctl.telemetry import make_client, parse_metrics, scrape, scrape_many

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


async def over_a_socket(payload: bytes, adapter: vllm.VLLMAdapter) -> list[tuple[str, float]]:
    """One engine scraped over a real local keep-alive connection, by httpx's own transport and by the
    router's ``LeanTransport``, in interleaved rounds. The server is a canned answer written from
    ``data_received``, so what differs between the rows is the client."""
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
    clients = {"httpx transport": make_client(), "LeanTransport (router)": make_client(LeanTransport(pool))}
    took: dict[str, list[float]] = {name: [] for name in clients}
    n = 200
    for _ in range(5):
        for name, client in clients.items():
            await scrape(client, url, adapter)  # warm: the connection is open
            start = time.perf_counter()
            for _ in range(n):
                await scrape(client, url, adapter)
            took[name].append((time.perf_counter() - start) / n * 1e6)
    for client in clients.values():
        await client.aclose()
    pool.close()
    server.close()
    return [(f"scrape over a socket, {name}", statistics.median(us)) for name, us in took.items()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engines", type=int, default=3, help="data-parallel engines (label sets) per payload")
    ap.add_argument("--fleet", type=int, default=64, help="engines scraped by one router core")
    ap.add_argument("--period-ms", type=float, default=100.0, help="scrape period")
    args = ap.parse_args()

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
        print(f"  {label:<52} {us:9.1f} us   {share(us)}")
    print()
    speedup = unfiltered / filtered
    print(f"  filtered / unfiltered                 {filtered / unfiltered:6.3f}  ({speedup:.1f}x faster)")
    over = dict(rows)
    lean, plain = (
        over["scrape over a socket, LeanTransport (router)"],
        over["scrape over a socket, httpx transport"],
    )
    print(f"  scrape over a socket, lean / httpx    {lean / plain:6.3f}  (parse and signals included)")
    if client_us is not None:
        print(f"  prometheus_client / ours, unfiltered  {client_us / unfiltered:6.1f}x")
        print(f"  prometheus_client / ours, filtered    {client_us / filtered:6.1f}x")
    budget_us = 1500.0
    verdict = "within" if with_signals < budget_us else "OVER"
    print(f"  budget per payload (filtered+signals) {budget_us:.0f} us: {verdict} ({with_signals:.0f} us)")


if __name__ == "__main__":
    main()
