"""Router replicas fed the same KV events make the same choice for the same request."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from routerkit import fresh

from infctl.router import Backend, RequestInfo, RouterCore, Snapshot, build_policy
from infctl.sim.types import BlockRemoved, BlockStored

BACKENDS = tuple(Backend(f"e{i}") for i in range(6))
PRECISE = ["cache_aware", "prefix_precise", "weighted"]

chains = st.lists(st.integers(0, 5), min_size=1, max_size=24)  # hashes drawn from a small alphabet collide


@st.composite
def steps(draw: st.DrawFn) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.sampled_from(["store", "store", "remove", "route"]))
        if kind == "route":
            out.append(("route", tuple(draw(chains))))
        else:
            backend = draw(st.sampled_from([b.id for b in BACKENDS]))
            hashes = draw(chains)
            ev = BlockStored(hashes, None, [], 16) if kind == "store" else BlockRemoved(hashes)
            out.append((backend, ev))
    return out


@settings(max_examples=150, deadline=None)
@given(
    script=steps(),
    preset=st.sampled_from(PRECISE),
    index=st.sampled_from(["precise", "auto"]),
    loads=st.lists(st.integers(0, 30), min_size=6, max_size=6),
)
def test_replicas_with_the_same_events_choose_alike(
    script: list[tuple[str, object]], preset: str, index: str, loads: list[int]
) -> None:
    config = {"preset": preset, "index": index}
    one, two = RouterCore(build_policy(config)), RouterCore(build_policy(config))
    states = {
        b.id: fresh(running=n, inflight=n, queued_tokens=100 * n)
        for b, n in zip(BACKENDS, loads, strict=True)
    }
    seq = 0
    for i, (who, what) in enumerate(script):
        if who == "route":
            assert isinstance(what, tuple)
            req = RequestInfo(f"r{i}", prompt_tokens=16 * len(what) + 5, block_hashes=what)
            snap = Snapshot(BACKENDS, states, 0.5 * i)  # speculative entries expire along the way
            a, b = one.route(snap, req), two.route(snap, req)
            assert (a.backend_id, a.reason, a.matched_blocks) == (b.backend_id, b.reason, b.matched_blocks)
        else:
            seq += 1
            one.apply_kv_events(who, seq, [what])
            two.apply_kv_events(who, seq, [what])


def test_precise_index_drives_cache_aware() -> None:
    core = RouterCore(build_policy({"preset": "cache_aware", "index": "precise"}))
    states = {b.id: fresh() for b in BACKENDS}
    core.apply_kv_events("e3", 0, [BlockStored(list(range(50)), None, [], 16)])
    d = core.route(
        Snapshot(BACKENDS, states, 0.0), RequestInfo("x", prompt_tokens=1000, block_hashes=tuple(range(60)))
    )
    assert (d.backend_id, d.reason, d.matched_blocks) == ("e3", "prefix_hit", 50)
