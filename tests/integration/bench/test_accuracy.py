"""Against a server with known delays, the client measures TTFT within 2 ms at p50, and ITL and TPOT too.

The fake server shares the test's event loop and records when it actually wrote each first token
(asyncio timers wake up to 1 ms late and this 2-core machine is shared, so "known" means recorded);
it streams a role-only chunk at once, which must not count as the first token.
"""

from __future__ import annotations

import itertools
import statistics

import pytest
from benchkit import FakeServer, StartFake

from infctl.bench import BenchConfig, LengthDist, LoadPlan, RandomSpec, Stage, run_benchmark


def config(url: str, api: str, concurrency: int, n: int) -> BenchConfig:
    return BenchConfig(
        url=url,
        api=api,  # type: ignore[arg-type]
        workload=RandomSpec(input=LengthDist(mean=16), output=LengthDist(mean=6)),
        load=LoadPlan(stages=[Stage(concurrency=concurrency, num_requests=n)]),
    )


def applied(fake: FakeServer) -> tuple[list[float], list[float]]:
    """What the server really did: every gap between two content chunks it wrote, and each request's time per
    output token (first write to last, over the gaps)."""
    gaps = [b - a for w in fake.writes for a, b in itertools.pairwise(w)]
    tpot = [(w[-1] - w[0]) / (len(w) - 1) for w in fake.writes if len(w) > 1]
    return gaps, tpot


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_ttft_itl_tpot_match_the_server(start_fake: StartFake, api: str) -> None:
    fake = await start_fake(ttft_s=0.05, itl_s=0.01)
    result = await run_benchmark(config(fake.url, api, concurrency=1, n=25))
    s = result.summary
    assert s.completed == 25 and s.failed == 0
    assert s.itl.count == 25 * 5 and s.total_output_tokens == 25 * 6  # tokens from usage
    # One at a time, so the client's requests and the server's records pair up in order.
    ttft = [r.chunk_times[0] - r.sent_s for r in result.requests]
    errors = [m - known for m, known in zip(ttft, fake.delays, strict=True)]
    # Within 2 ms of the delay the server really applied: the client's own send and parse cost ~0.7-1.1 ms
    # here, so a 1 ms bound failed 1 in 3 idle runs on the older code too; a role chunk counted as the first
    # token (~-50 ms) or the stream's end (~+50 ms) still fails it.
    assert 0 <= statistics.median(errors) < 0.002
    e2e = [r.chunk_times[-1] - r.sent_s for r in result.requests]
    late = [m - w[-1] for m, w in zip(e2e, fake.writes, strict=True)]
    assert 0 <= statistics.median(late) < 0.002  # and of when it really wrote the last token
    # ITL and TPOT against the gaps the server really left, not the nominal 10 ms: on a loaded machine its
    # timers wake late, then catch up (the deadlines are fixed), so the nominal bounds failed (p50 TTFT 55 ms
    # against 50 +- 3 with two CPU hogs running); it still fails if the role chunk counted or a gap was lost.
    gaps, tpot = applied(fake)
    assert abs(s.itl["p50"] - statistics.median(gaps)) < 0.001
    assert abs(s.tpot["mean"] - statistics.mean(tpot)) < 0.001


async def test_concurrent_requests_stay_accurate(start_fake: StartFake) -> None:
    fake = await start_fake(ttft_s=0.03, itl_s=0.005)
    s = (await run_benchmark(config(fake.url, "chat", concurrency=8, n=80))).summary
    # The server shares this event loop: its work for 8 streams delays what the client sees. How much later
    # the client saw the first token than the server wrote it is held to how much later it saw the last one
    # (the same backlog, measured in the same run): a loaded machine stretched both to 15-20 ms, and a fixed
    # 6 ms bound failed (CPU hogs: p50 TTFT 46 ms against 30.5 ms written). Neither can be negative (the
    # client sends before the server reads, and reads after it writes); it still fails if the role chunk
    # counted (~-30 ms) or the stream's end did (the stream's length beyond the last token's lag).
    lead = s.ttft["p50"] - statistics.median(fake.delays)
    tail = s.e2e["p50"] - statistics.median(w[-1] for w in fake.writes)
    assert 0 <= lead < tail + 0.006, (lead, tail)
    # Against the gaps the server really left: eight streams' late timers catching up write tokens back to
    # back, which a loaded machine turned into a 0.15 ms p50 (the nominal 5 ms +- 1 failed).
    gaps, _ = applied(fake)
    assert abs(s.itl["p50"] - statistics.median(gaps)) < 0.001
