"""Builders and Hypothesis strategies shared by the router tests (imported as a sibling module)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from infctl.router import Backend, BackendState, RequestInfo, Snapshot
from infctl.telemetry.signals import EngineSignals


def fresh(
    queue: float = 0,
    running: float = 0,
    kv: float = 0.0,
    inflight: int = 0,
    queued_tokens: float = 0.0,
    inflight_tokens: float = 0.0,
    age: float = 0.0,
    capacity: int | None = 100_000,
) -> BackendState:
    sig = EngineSignals(
        queue=queue, running=running, kv_usage=kv, cache_capacity_tokens=capacity, block_size=16
    )
    return BackendState(sig, age, inflight, queued_tokens, inflight_tokens)


STALE = BackendState(EngineSignals(), signals_age_s=5.0)


def snap(backends: Sequence[Backend], states: dict[str, BackendState] | None = None) -> Snapshot:
    states = states if states is not None else {b.id: fresh() for b in backends}
    return Snapshot(tuple(backends), states, now=0.0)


def request(rid: str = "r1", tokens: int = 0, blocks: int = 0, **kw: Any) -> RequestInfo:
    hashes = tuple(range(1000, 1000 + blocks))
    return RequestInfo(rid, prompt_tokens=max(tokens, blocks * 16), block_hashes=hashes, **kw)


def backend_ids(n: int) -> list[str]:
    return [f"b{i}" for i in range(n)]


@st.composite
def backends_and_states(draw: st.DrawFn, min_size: int = 1, max_size: int = 10) -> Snapshot:
    """A snapshot with random health flags, roles, pools, weights, freshness and loads."""
    n = draw(st.integers(min_size, max_size))
    backends: list[Backend] = []
    states: dict[str, BackendState] = {}
    for i in range(n):
        bid = f"b{i}"
        backends.append(
            Backend(
                bid,
                role=draw(st.sampled_from(["both", "both", "both", "prefill", "decode"])),
                group=draw(st.sampled_from(["g0", "g1", None])),
                pool=draw(st.sampled_from(["short", "long", None])),
                weight=draw(st.sampled_from([0.5, 1.0, 1.0, 2.0])),
                healthy=draw(st.booleans()) or draw(st.booleans()),
                ejected=draw(st.integers(0, 4)) == 0,
                draining=draw(st.integers(0, 5)) == 0,
            )
        )
        if draw(st.integers(0, 3)) == 0:
            states[bid] = STALE
        else:
            states[bid] = fresh(
                queue=draw(st.integers(0, 20)),
                running=draw(st.integers(0, 50)),
                kv=draw(st.floats(0, 1)),
                inflight=draw(st.integers(0, 60)),
                queued_tokens=draw(st.floats(0, 1e5)),
                inflight_tokens=draw(st.floats(0, 1e6)),
            )
    return Snapshot(tuple(backends), states, now=0.0)


@st.composite
def requests(draw: st.DrawFn) -> RequestInfo:
    blocks = draw(st.integers(0, 64))
    return RequestInfo(
        draw(st.text("abcdef0123456789", min_size=1, max_size=12)),
        prompt_tokens=blocks * 16 + draw(st.integers(0, 15)),
        block_hashes=tuple(range(blocks)),
        session_key=draw(st.one_of(st.none(), st.sampled_from(["s1", "s2", "s3"]))),
    )


@st.composite
def matches_for(draw: st.DrawFn, snapshot: Snapshot, req: RequestInfo) -> dict[str, int]:
    out: dict[str, int] = {}
    for b in snapshot.backends:
        m = draw(st.integers(0, req.num_blocks))
        if m:
            out[b.id] = m
    return out


def finite(x: float) -> bool:
    return not math.isinf(x) and not math.isnan(x)
