"""Failures are classified: HTTP status, in-stream error, timeout, truncated stream, connection refused."""

from __future__ import annotations

import socket

import pytest
from benchkit import StartFake

from infctl.bench import BenchConfig, LengthDist, LoadPlan, RandomSpec, Stage, run_benchmark


def config(url: str, mode: str, **kw: object) -> BenchConfig:
    return BenchConfig(
        url=url,
        model="fake-model",
        endpoint=f"/v1/completions?mode={mode}",
        workload=RandomSpec(input=LengthDist(mean=8), output=LengthDist(mean=5)),
        load=LoadPlan(stages=[Stage(concurrency=3, num_requests=3)]),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("mode", "kind", "detail"),
    [
        ("500", "http_500", "HTTP 500: "),
        ("in_stream", "in_stream_error", "KV cache exhausted"),
        ("hang", "timeout", "no complete answer within 0.3 s"),
        ("truncate", "truncated_stream", "after"),
        ("no_done", "truncated_stream", "without [DONE]"),
    ],
)
async def test_error_classes(start_fake: StartFake, mode: str, kind: str, detail: str) -> None:
    fake = await start_fake(ttft_s=0.005, itl_s=0.002)
    # The short limit only where the server hangs: on a loaded machine the other modes' ~10 ms can pass
    # 0.3 s, and their failure is then classed as a timeout.
    result = await run_benchmark(config(fake.url, mode, timeout_s=0.3 if mode == "hang" else 30.0))
    s = result.summary
    assert (s.completed, s.failed) == (0, 3)
    assert s.error_kinds == {kind: 3}
    assert detail in s.error_examples[kind]
    assert s.ttft.count == 0 and s.good is None
    d = result.to_dict()
    assert d["errors"]["total"] == 3 and sum(d["errors"]["by_class"].values()) == 3


async def test_connection_refused() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the run: nothing listens there
    s = (await run_benchmark(config(f"http://127.0.0.1:{port}", "ok"))).summary
    assert s.errors == {"connection": 3}
