"""How fast can the load generator go? infctl bench vs guidellm against one null server, side by side.

A null server (aiohttp, in its own process on 127.0.0.1) answers every completion at once with a tiny SSE
stream (two content chunks, usage, [DONE]). Then, in this one run:

1. raw client loops (aiohttp vs httpx), the measurement behind the bench client's choice of aiohttp;
2. infctl bench at a fixed concurrency (closed loop): completed requests per second;
3. infctl bench open loop: the highest request rate whose sends keep up with the schedule
   (achieved >= 95% of the schedule, send lag p99 <= 10 ms, no failures);
4. guidellm (``pip install guidellm``; a separate venv works, see --guidellm) in its throughput profile
   with the same concurrency and request count, run as a subprocess against the same server, once with its
   default worker processes and once with one per core; the ratio uses its better run.

It prints each rate and the ratio infctl / guidellm (goal: >= 1.5x). Both share this machine's cores
with the null server, as any client on one host would.

    python benchmarks/bench_client_ceiling.py [--requests 3000] [--concurrency 64] [--guidellm PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_CHUNK = '{"id":"x","object":"%s","model":"null","choices":[{"index":0,%s,"finish_reason":%s}]}'


def _sse(chat: bool) -> bytes:
    obj = "chat.completion.chunk" if chat else "text_completion"
    events = []
    for text, reason in ((" hello", "null"), (" world", '"length"')):
        body = f'"delta":{{"content":"{text}"}}' if chat else f'"text":"{text}"'
        events.append(_CHUNK % (obj, body, reason))
    events.append(
        '{"id":"x","choices":[],"usage":{"prompt_tokens":16,"completion_tokens":2,"total_tokens":18}}'
    )
    events.append("[DONE]")
    return "".join(f"data: {e}\n\n" for e in events).encode()


def serve(port: int) -> None:
    """The null server: instant answers, no per-request work beyond reading the body."""
    from aiohttp import web

    bodies = {False: _sse(False), True: _sse(True)}

    async def complete(request: web.Request) -> web.Response:
        await request.read()
        chat = request.path.endswith("chat/completions")
        return web.Response(body=bodies[chat], content_type="text/event-stream")

    async def models(_: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "null-model", "object": "model"}]})

    async def health(_: web.Request) -> web.Response:
        return web.Response()

    app = web.Application()
    app.router.add_post("/v1/completions", complete)
    app.router.add_post("/v1/chat/completions", complete)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port)])
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("the null server did not start")


# -- 1. raw loops ------------------------------------------------------------------------------------------
async def raw_aiohttp(url: str, n: int, c: int) -> float:
    import aiohttp

    body = json.dumps({"model": "null", "prompt": "a b c", "max_tokens": 2, "stream": True}).encode()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as s:
        todo = iter(range(n))

        async def worker() -> None:
            for _ in todo:
                async with s.post(f"{url}/v1/completions", data=body) as r:
                    async for _chunk in r.content.iter_any():
                        pass

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(c)))
        return n / (time.perf_counter() - t0)


async def raw_httpx(url: str, n: int, c: int) -> float:
    import httpx

    body = json.dumps({"model": "null", "prompt": "a b c", "max_tokens": 2, "stream": True}).encode()
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    async with httpx.AsyncClient(limits=limits, trust_env=False) as s:
        todo = iter(range(n))

        async def worker() -> None:
            for _ in todo:
                async with s.stream("POST", f"{url}/v1/completions", content=body) as r:
                    async for _chunk in r.aiter_raw():
                        pass

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(c)))
        return n / (time.perf_counter() - t0)


# -- 2./3. infctl bench --------------------------------------------------------------------------------------
def infctl_config(url: str, stage: Any) -> Any:
    from infctl.bench import BenchConfig, LengthDist, LoadPlan, RandomSpec

    workload = RandomSpec(input=LengthDist(mean=16), output=LengthDist(mean=2))
    return BenchConfig(
        url=url, model="null-model", workload=workload, load=LoadPlan(stages=[stage], warmup=64)
    )


def infctl_closed(url: str, n: int, c: int) -> Any:
    from infctl.bench import Stage, run

    return run(infctl_config(url, Stage(concurrency=c, num_requests=n)))


def infctl_open(url: str, start: float, seconds: float) -> list[tuple[float, Any]]:
    """Rates from ``start`` up by 15% steps until the client falls behind; every probe's result."""
    from infctl.bench import Stage, run

    probes = []
    rate = start
    while True:
        r = run(infctl_config(url, Stage(rate=rate, num_requests=max(200, int(rate * seconds)))))
        probes.append((rate, r))
        if not kept(rate, r):
            return probes
        rate *= 1.15


def kept(rate: float, r: Any) -> bool:
    """The client kept up with ``rate``: it sent >= 95% of it, on time at the median, with no failure.

    (p99 send lag is reported but not required: on a shared 2-core host the OS alone deschedules a process
    for tens of milliseconds now and then.)"""
    return bool((r.client.achieved_rate or 0) >= 0.95 * rate and r.client.send_lag["p50"] <= 0.002
                and not r.summary.failed)  # fmt: skip


# -- 4. guidellm ---------------------------------------------------------------------------------------------
def find_guidellm(given: str | None) -> str | None:
    for cand in (
        given,
        os.environ.get("GUIDELLM"),
        shutil.which("guidellm"),
        "/tmp/guidellm-venv/bin/guidellm",
    ):
        if cand and Path(cand).exists():
            return cand
    return None


def tiny_tokenizer(guidellm: str, where: Path) -> Path:
    """guidellm's synthetic data needs a Hugging Face tokenizer; none can be downloaded here, so build a
    word-level one with the ``tokenizers`` package guidellm itself depends on."""
    script = (
        "import sys\n"
        "from tokenizers import Tokenizer, models, pre_tokenizers\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "words = ['<unk>', '<eos>'] + [f'w{i}' for i in range(4000)]\n"
        "tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token='<unk>'))\n"
        "tok.pre_tokenizer = pre_tokenizers.Whitespace()\n"
        "PreTrainedTokenizerFast(tokenizer_object=tok, unk_token='<unk>', eos_token='<eos>')"
        ".save_pretrained(sys.argv[1])\n"
    )
    python = Path(guidellm).with_name("python")
    subprocess.run([str(python if python.exists() else sys.executable), "-c", script, str(where)], check=True)
    return where


def run_guidellm(
    guidellm: str, url: str, n: int, c: int, work: Path, workers: int | None = None
) -> tuple[float | None, str]:
    """One guidellm run; ``workers`` sets its worker processes (default: guidellm's own, 10)."""
    tok = work / "tokenizer"
    if not tok.exists():
        tiny_tokenizer(guidellm, tok)
    out = work / f"guidellm-{workers}.json"
    cmd = [
        guidellm, "run",
        "--backend", f"kind=openai_http,target={url},model=null-model",
        "--profile", f"kind=throughput,max_concurrency={c}",
        "--data", "kind=synthetic_text,prompt_tokens=16,output_tokens=2",
        "--tokenizer", f"kind=huggingface_auto,model={tok}",
        "--constraint", f"kind=max_requests,count={n}",
        "--disable-console-interactive",
        "--output", f"kind=json,path={out}",
    ]  # fmt: skip
    t0 = time.perf_counter()
    env = {**os.environ, **({"GUIDELLM__MAX_WORKER_PROCESSES": str(workers)} if workers else {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return None, f"guidellm failed (exit {proc.returncode}): {' | '.join(tail)}"
    rate = guidellm_rate(json.loads(out.read_text()))
    return rate, f"wall {wall:.0f} s with process start"


def guidellm_rate(report: dict[str, Any]) -> float | None:
    """Successful requests over the benchmark's own duration, from guidellm's JSON report."""
    benchmarks = report.get("benchmarks") or []
    if not benchmarks:
        return None
    bench = benchmarks[0]
    rps = bench.get("metrics", {}).get("requests_per_second", {}).get("successful", {})
    count, duration = rps.get("count"), bench.get("duration")
    if isinstance(count, int) and isinstance(duration, int | float) and duration > 0:
        return count / duration
    mean = rps.get("mean")
    return float(mean) if isinstance(mean, int | float) else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--open-loop-seconds", type=float, default=3.0)
    ap.add_argument("--guidellm", help="guidellm executable (default: $GUIDELLM, PATH, /tmp/guidellm-venv)")
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return
    n, c = args.requests, args.concurrency
    proc, url = start_server()
    try:
        print(
            f"null server {url} (aiohttp, own process); {os.cpu_count()} CPUs; {n} requests, concurrency {c}"
        )
        a = asyncio.run(raw_aiohttp(url, n, c))
        h = asyncio.run(raw_httpx(url, min(n, 1000), c))
        print(f"raw client loops: aiohttp {a:,.0f} req/s, httpx {h:,.0f} req/s ({a / h:.1f}x)")
        closed = infctl_closed(url, n, c)
        ours = closed.summary.request_throughput
        print(f"infctl bench, concurrency {c}: {ours:,.0f} req/s completed "
              f"(client CPU {closed.client.cpu_util:.0%}, failed {closed.summary.failed})")  # fmt: skip
        probes = infctl_open(url, max(20.0, round(ours * 0.3, -1)), args.open_loop_seconds)
        good = [rate for rate, r in probes if kept(rate, r)]
        last_rate, last = probes[-1]
        lag = last.client.send_lag
        behind = (
            f"at {last_rate:,.0f} req/s it sent {last.client.achieved_rate or 0:,.0f}/s, send lag p50 "
            f"{lag['p50'] * 1e3:.1f} ms, p99 {lag['p99'] * 1e3:.1f} ms, client CPU {last.client.cpu_util:.0%}"
        )
        if good:
            print(f"infctl bench, open loop: highest rate kept {max(good):,.0f} req/s ({behind})")
        else:
            print(
                f"infctl bench, open loop: fell behind at the first rate tried ({behind}); the host is busy"
            )
        guidellm = find_guidellm(args.guidellm)
        if guidellm is None:
            print("guidellm: not found; pip install guidellm (or pass --guidellm PATH)")
            return
        rates = []
        with tempfile.TemporaryDirectory() as tmp:
            # guidellm's default 10 worker processes, and one per core (its best on a small host)
            for workers in (None, os.cpu_count() or 2):
                theirs, note = run_guidellm(guidellm, url, n, c, Path(tmp), workers)
                name = f"{workers} worker processes" if workers else "default worker processes"
                if theirs is None:
                    print(f"guidellm ({name}): {note}")
                    continue
                rates.append(theirs)
                print(
                    f"guidellm, throughput profile, max_concurrency {c}, {name}: {theirs:,.0f} req/s ({note})"
                )
        if rates:
            print(f"ratio infctl / guidellm (its best run): {ours / max(rates):.2f}x (goal >= 1.5x)")
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
