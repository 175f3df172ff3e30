"""How long a router takes from exec to serving: a fresh ``python -m infctl router`` process until it
accepts a connection and until it answers its first routed completion, as a restarted replica must (issue 18:
<= 2 s).

    python benchmarks/bench_router_startup.py [--runs 15] [--target 2.0] [--tokenizer words] [--tree DIR ...]

One fake engine (a small HTTP/1.1 server in this process: ``/health``, an empty ``/metrics``, a one-word
``/v1/completions``) stands behind every router started; the router is started as the local target starts it
(``--host 127.0.0.1 --port P --engine vllm --policy cache_aware --tokenizer T --backend URL,role=both``).
From the spawn this process connects every 5 ms: ``bound`` is the first accepted connection, ``served`` the
first ``POST /v1/completions`` answered 200 through the router (sent as soon as a connection is accepted, so
it measures what a load balancer's first request would see). ``cpu`` is the router's user + system time at
the moment it served (``/proc/PID/stat``): what start-up costs, less moved by other load than the wall clock.
A bare ``python -c pass`` is timed in the same rounds as the interpreter's floor. ``--tree DIR``
(repeatable) runs the router from other source trees too (``git archive REV infctl | tar -x -C DIR``: the
router starts with ``DIR`` as its working directory, so ``python -m infctl`` imports ``DIR/infctl``), one run
of each per round, so a before/after comparison sees the same load. The router is stopped (SIGTERM) after
each run.

Timings, not a test: on a shared 2-core machine the spread is wide; report min, median, p90 and max.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMPLETION = (
    b'{"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" w","finish_reason":"length"}]}'
)
REQUEST = (
    b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Content-Length: 42\r\nConnection: close\r\n\r\n{"model":"m","prompt":"hi","max_tokens":1}'
)


class FakeEngine(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._answer(b"" if self.path == "/metrics" else b"{}")

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(COMPLETION)

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def try_serve(port: int) -> tuple[bool, bool]:
    """(connection accepted, completion answered 200)."""
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError:
        return False, False
    with s:
        s.sendall(REQUEST)
        head = b""
        while b"\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                return True, False
            head += chunk
    return True, head.startswith(b"HTTP/1.1 200")


def once(engine_url: str, tokenizer: str, tree: Path) -> tuple[float, float, float]:
    """(seconds to bound, seconds to served, router CPU seconds when served)."""
    port = free_port()
    argv = [sys.executable, "-m", "infctl", "router", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--engine", "vllm", "--policy", "cache_aware", "--tokenizer", tokenizer]
    argv += ["--backend", f"{engine_url},role=both"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bound = None
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"router exited with {proc.returncode}: {' '.join(argv)}")
            accepted, served = try_serve(port)
            now = time.perf_counter() - start
            if accepted and bound is None:
                bound = now
            if served:
                assert bound is not None
                return bound, now, cpu_s(proc.pid)
            time.sleep(0.005)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


def floor() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def row(name: str, values: list[float]) -> str:
    ms = sorted(v * 1e3 for v in values)
    p90 = ms[min(len(ms) - 1, round(0.9 * (len(ms) - 1)))]
    return f"{name:<34} {ms[0]:6.0f} {statistics.median(ms):6.0f} {p90:6.0f} {ms[-1]:6.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--target", type=float, default=2.0, help="Bar for the served median, seconds.")
    parser.add_argument("--tokenizer", default="words", help="The router's --tokenizer (words, estimate...).")
    parser.add_argument(
        "--tree", type=Path, action="append", default=[], help="Another source tree to time (repeatable)."
    )
    args = parser.parse_args()
    trees = [Path(__file__).resolve().parents[1], *(t.resolve() for t in args.tree)]
    engine = ThreadingHTTPServer(("127.0.0.1", 0), FakeEngine)
    threading.Thread(target=engine.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{engine.server_address[1]}"
    for tree in trees:
        once(url, args.tokenizer, tree)  # warms the page cache and the bytecode
    runs: dict[Path, list[tuple[float, float, float]]] = {tree: [] for tree in trees}
    floors, loads = [], []
    for _ in range(args.runs):
        loads.append(os.getloadavg()[0])
        floors.append(floor())
        for tree in trees:
            runs[tree].append(once(url, args.tokenizer, tree))
    engine.shutdown()
    print(f"{'ms from exec':<34} {'min':>6} {'median':>6} {'p90':>6} {'max':>6}")
    print(row("python -c pass (floor)", floors))
    for tree, results in runs.items():
        print(f"{tree}:")
        for i, what in enumerate(("bound", "served", "cpu when served")):
            print(row(f"  router {what}", [r[i] for r in results]))
        served = statistics.median(r[1] for r in results)
        print(f"  served median <= {args.target:g} s: {'yes' if served <= args.target else 'NO'}")
    print(
        f"{args.runs} runs each, interleaved (python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {min(loads):.1f}-{max(loads):.1f} at the rounds' starts)"
    )


if __name__ == "__main__":
    from saved import save_if_asked  # benchmarks/saved.py

    save_if_asked()  # --save PATH: this run's output, command, date and commit as a result record
    main()
