from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.errors import ConfigError
from infctl.sim.offload import GIB, HostTier, OffloadTier
from infctl.sim.profiles import get_profile
from infctl.sim.scheduler import EngineCore
from infctl.sim.types import BlockRemoved, BlockStored, SimRequest, StepOutput
from infctl.sim.virtual import run_until_idle
from infctl.tokens import block_hashes, synth_words, token_ids

TINY = get_profile("tiny-cpu")
"""512 blocks of 16 tokens, 1,024 KV bytes per token: 16 KiB per block."""
BLOCK_BYTES = TINY.kv_bytes_per_token * TINY.block_size


def prompt(n: int, salt: int = 0) -> list[int]:
    return token_ids(synth_words(n, salt=salt))


def req(rid: str, ids: list[int], arrival: float, max_tokens: int = 1) -> SimRequest:
    return SimRequest(rid, ids, max_tokens, arrival)


def flood(start: float, n: int = 6) -> list[SimRequest]:
    """Distinct 2,000-token prompts, one after another: 6 * 125 blocks push everything older out of HBM."""
    return [req(f"flood{i}", prompt(2000, salt=100 + i), start + i) for i in range(n)]


def evict_then_repeat(core: EngineCore, ids: list[int], *, gap: float = 1.0) -> tuple[float | None, int]:
    """Run ``ids``, flood HBM, run ``ids`` again; the repeat's TTFT and cached tokens."""
    run_until_idle(core, [req("first", ids, 0.0)])
    run_until_idle(core, flood(1.0))
    repeat = run_until_idle(core, [req("again", ids, 10.0 + gap)])["again"]
    return repeat.ttft, repeat.cached_tokens


# -- the config --------------------------------------------------------------------------------------


def test_capacity_in_gib_becomes_blocks_of_the_profiles_kv_size() -> None:
    assert OffloadTier(capacity_gib=1.0).num_blocks(BLOCK_BYTES) == GIB // BLOCK_BYTES
    assert OffloadTier(capacity_gib=1.0, capacity_blocks=7).num_blocks(BLOCK_BYTES) == 7


@pytest.mark.parametrize(
    "bad",
    [{"capacity_gib": -1.0}, {"load_gbps": 0.0}, {"store_gbps": -2.0}, {"latency_s": -1.0},
     {"write_policy": "write_around"}],
)  # fmt: skip
def test_invalid_tiers_are_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        OffloadTier(**bad)  # type: ignore[arg-type]


# -- the tier's own state ----------------------------------------------------------------------------


def tier(capacity: int, **kw: object) -> HostTier:
    cfg = OffloadTier(capacity_blocks=capacity, load_gbps=1.0, store_gbps=2.0, **kw)  # type: ignore[arg-type]
    return HostTier(cfg, block_size=16, kv_bytes_per_token=1024, record_events=True)


def test_tier_is_an_lru_of_its_capacity_and_reports_cpu_events() -> None:
    t = tier(4)
    t.store([1, 2, 3], 0.0)
    t.store([2], 0.0)  # refreshed: 1 is now the oldest
    t.store([4, 5], 0.0)
    assert t.hashes() == [3, 2, 4, 5]
    assert t.drain_events() == [
        BlockStored([1, 2, 3], None, [], 16, medium="CPU"),
        BlockStored([4, 5], None, [], 16, medium="CPU"),
        BlockRemoved([1], medium="CPU"),
    ]
    t.load([3], 10.0)  # a load is a use too
    t.store([6], 10.0)
    assert t.hashes() == [4, 5, 3, 6]


def test_stores_queue_on_the_link_and_a_copy_is_found_only_once_done() -> None:
    t = tier(10, latency_s=0.001)
    per_block = BLOCK_BYTES / 2e9
    t.store([1, 2], 0.0)
    t.store([3], 0.0)  # starts when the first copy ends
    first_done = 0.001 + 2 * per_block
    second_done = first_done + 0.001 + per_block
    assert t.lookup([1, 2, 3], 0, 3, first_done - 1e-9) == 0
    assert t.lookup([1, 2, 3], 0, 3, first_done) == 2
    assert t.lookup([1, 2, 3], 0, 3, second_done) == 3
    assert t.lookup([1, 2, 3], 1, 2, second_done) == 1
    assert t.stats().store_bytes == 3 * BLOCK_BYTES


def test_loads_queue_on_the_link() -> None:
    t = tier(10)
    t.store([1, 2, 3], 0.0)
    per_block = BLOCK_BYTES / 1e9
    assert t.load([1, 2], 5.0) == pytest.approx(5.0 + 2 * per_block)
    assert t.load([3], 5.0) == pytest.approx(5.0 + 3 * per_block)
    assert t.stats().load_bytes == 3 * BLOCK_BYTES


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 6),
    st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 12), max_size=6)), max_size=30),
)
def test_random_stores_stay_within_capacity_and_events_track_contents(
    capacity: int, ops: list[tuple[bool, list[int]]]
) -> None:
    t = tier(capacity)
    now = 0.0
    for is_store, hashes in ops:
        now += 1.0
        if is_store:
            t.store(list(dict.fromkeys(hashes)), now)
        else:
            n = t.lookup(hashes, 0, len(hashes), now + 100.0)
            if n:
                t.load(hashes[:n], now)
        assert len(t) <= capacity
    held: set[int] = set()
    for ev in t.drain_events():
        if isinstance(ev, BlockStored):
            assert not held & set(ev.block_hashes)
            held |= set(ev.block_hashes)
        else:
            held -= set(ev.block_hashes)
    assert held == set(t.hashes())


# -- the engine with a tier --------------------------------------------------------------------------


def test_prompt_evicted_from_hbm_is_loaded_from_the_tier_with_the_copy_charged() -> None:
    ids = prompt(1000)
    cold, _ = evict_then_repeat(EngineCore(TINY), ids)
    cfg = OffloadTier(capacity_blocks=2000, load_gbps=0.5, latency_s=0.002)
    core = EngineCore(TINY, offload=cfg)
    ttft, cached = evict_then_repeat(core, ids)
    hit_blocks = 999 // 16
    load = 0.002 + hit_blocks * BLOCK_BYTES / 0.5e9
    assert cached == hit_blocks * 16
    assert ttft == pytest.approx(load + TINY.expected_ttft(1000, cached_tokens=cached))
    assert cold == pytest.approx(TINY.expected_ttft(1000))
    tier_stats = core.stats().tier
    assert tier_stats is not None
    assert tier_stats.hit_tokens == cached and tier_stats.load_bytes == hit_blocks * BLOCK_BYTES


def test_slower_link_costs_more_and_hbm_hits_are_not_counted_as_tier_hits() -> None:
    ids = prompt(1000)
    fast = EngineCore(TINY, offload=OffloadTier(capacity_blocks=2000, load_gbps=10.0))
    slow = EngineCore(TINY, offload=OffloadTier(capacity_blocks=2000, load_gbps=0.1))
    fast_ttft, _ = evict_then_repeat(fast, ids)
    slow_ttft, _ = evict_then_repeat(slow, ids)
    assert fast_ttft is not None and slow_ttft is not None and slow_ttft > fast_ttft
    # Still in HBM: an HBM hit, the tier is not asked for what HBM holds.
    hot = run_until_idle(fast, [req("hot", ids, 100.0)])["hot"]
    stats = fast.stats()
    assert stats.tier is not None and stats.tier.hit_tokens == 992
    assert hot.cached_tokens == 992 and hot.ttft == pytest.approx(TINY.expected_ttft(1000, 992))


def test_a_tier_too_small_for_the_prefix_keeps_only_its_tail_and_gives_no_hit() -> None:
    core = EngineCore(TINY, offload=OffloadTier(capacity_blocks=10, load_gbps=1.0))
    _, cached = evict_then_repeat(core, prompt(1000))
    t = core.tier
    assert t is not None and len(t) == 10
    assert cached == 0


def test_write_back_stores_only_what_hbm_evicts() -> None:
    ids = prompt(1000)
    core = EngineCore(TINY, offload=OffloadTier(capacity_blocks=2000, write_policy="write_back"))
    t = core.tier
    assert t is not None
    run_until_idle(core, [req("first", ids, 0.0)])
    assert len(t) == 0
    run_until_idle(core, flood(1.0))
    prompt_hashes = block_hashes(ids, 16, TINY.model)
    assert set(prompt_hashes) <= set(t.hashes())
    again = run_until_idle(core, [req("again", ids, 20.0)])["again"]
    assert again.cached_tokens == 992


def test_no_tier_and_an_empty_tier_schedule_exactly_alike() -> None:
    def workload() -> list[SimRequest]:
        shared = prompt(600, salt=7)
        return [
            SimRequest(f"r{i}", shared + prompt(50 + 37 * i, salt=i), 100 + 20 * (i % 5), 0.01 * i)
            for i in range(40)
        ]

    plain = EngineCore(TINY)
    empty = EngineCore(TINY, offload=OffloadTier(capacity_blocks=0))
    a = run_until_idle(plain, workload())
    b = run_until_idle(empty, workload())
    assert {k: (v.token_times, v.cached_tokens) for k, v in a.items()} == {
        k: (v.token_times, v.cached_tokens) for k, v in b.items()
    }
    assert plain.stats().tier is None and plain.tier is None
    assert plain.stats().preemptions == empty.stats().preemptions > 0


def test_hit_accounting_adds_up_to_the_prompt_tokens() -> None:
    # Six 1,500-token prefixes (564 blocks) cycle through a 512-block HBM; each is asked for twice in a row.
    shared = [prompt(1500, salt=s) for s in range(6)]
    requests = [
        SimRequest(f"r{i}", shared[i // 2 % 6] + prompt(40 + i, salt=50 + i), 2, 0.5 * i) for i in range(48)
    ]
    core = EngineCore(TINY, offload=OffloadTier(capacity_blocks=1500, load_gbps=2.0))
    prefill: list[int] = []

    def on_step(_: float, out: StepOutput) -> None:
        prefill.append(out.prefill_tokens)

    traces = run_until_idle(core, requests, on_step=on_step)
    stats = core.stats()
    assert stats.tier is not None and stats.preemptions == 0
    prompts = sum(len(r.prompt_ids) for r in requests)
    assert stats.tier.hit_tokens > 0 and stats.prefix_hits > 0
    assert stats.prefix_hits + stats.tier.hit_tokens + sum(prefill) == prompts
    assert stats.tier.query_tokens == prompts - stats.prefix_hits
    assert sum(t.cached_tokens for t in traces.values()) == stats.prefix_hits + stats.tier.hit_tokens


def test_tier_events_carry_medium_cpu_and_the_convention_hashes() -> None:
    ids = prompt(40)
    core = EngineCore(TINY, kv_events=True, offload=OffloadTier(capacity_blocks=100))
    core.add_request(req("a", ids, 0.0), 0.0)
    out = core.step(0.0)
    want = block_hashes(ids, 16, TINY.model)
    assert out.kv_events == [
        BlockStored(want, None, ids[:32], 16),
        BlockStored(want, None, [], 16, medium="CPU"),
    ]


def test_reset_prefix_cache_empties_the_tier() -> None:
    core = EngineCore(TINY, offload=OffloadTier(capacity_blocks=100))
    run_until_idle(core, [req("a", prompt(100), 0.0)])
    assert core.tier is not None and len(core.tier) == 6
    assert core.reset_prefix_cache()
    assert len(core.tier) == 0


def test_a_preempted_request_is_reloaded_from_the_tier_rather_than_recomputed() -> None:
    # Four 1,800-token prompts growing to 2,100 tokens overflow the 8,192-token pool and preempt.
    requests = [SimRequest(f"r{i}", prompt(1800, salt=i), 300, 0.0) for i in range(4)]

    def run(offload: OffloadTier | None) -> tuple[int, int]:
        core = EngineCore(TINY, offload=offload)
        prefill: list[int] = []
        run_until_idle(core, requests, on_step=lambda _, out: prefill.append(out.prefill_tokens))
        return sum(prefill), core.stats().preemptions

    recomputed, preemptions = run(None)
    reloaded, preemptions_with_tier = run(OffloadTier(capacity_blocks=2000, load_gbps=5.0))
    assert preemptions > 0 and preemptions_with_tier > 0
    assert reloaded < recomputed


PREFIXES = [prompt(64, salt=1000 + i) for i in range(3)]


@settings(max_examples=100, deadline=None)
@given(
    specs=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 64), st.integers(1, 40), st.integers(1, 20),
                  st.floats(0, 0.2)),
        min_size=1, max_size=14,
    ),
    blocks=st.integers(8, 40),
    max_seqs=st.integers(1, 6),
    budget=st.integers(8, 80),
    capacity=st.integers(0, 60),
    policy=st.sampled_from(["write_through", "write_back"]),
    abort_every=st.integers(0, 7),
)  # fmt: skip
def test_random_workloads_with_a_tier_finish_and_keep_both_tiers_consistent(
    specs: list[tuple[int, int, int, int, float]],
    blocks: int,
    max_seqs: int,
    budget: int,
    capacity: int,
    policy: str,
    abort_every: int,
) -> None:
    profile = TINY.with_overrides(
        num_gpu_blocks=blocks, block_size=4, max_num_seqs=max_seqs, max_num_batched_tokens=budget
    )
    # A slow link (4 KiB blocks at 0.1 GB/s: 41 us each, plus 1 ms) so loads overlap steps and arrivals.
    offload = OffloadTier(capacity_blocks=capacity, load_gbps=0.1, store_gbps=0.1, latency_s=0.001,
                          write_policy=policy)  # type: ignore[arg-type]  # fmt: skip
    core = EngineCore(profile, kv_events=True, offload=offload)
    reqs = [
        SimRequest(f"r{i}", PREFIXES[p][:m] + prompt(tail, salt=i), n, t)
        for i, (p, m, tail, n, t) in enumerate(specs)
    ]
    held: dict[str, set[int]] = {"GPU": set(), "CPU": set()}
    aborted: set[str] = set()
    steps = [0]

    def watch(_: float, out: StepOutput) -> None:
        pool = core.pool
        assert pool.used + pool.num_free == pool.num_blocks
        assert sorted(b for t in core.block_tables().values() for b in t) == sorted(
            b for b in range(pool.num_blocks) for _ in range(pool.ref[b])
        )
        for e in out.kv_events:
            if isinstance(e, BlockStored):
                assert not held[e.medium] & set(e.block_hashes)
                held[e.medium].update(e.block_hashes)
            else:
                assert set(e.block_hashes) <= held[e.medium]
                held[e.medium].difference_update(e.block_hashes)
        steps[0] += 1
        if abort_every and steps[0] % abort_every == 0:
            active = sorted(core.block_tables())
            if active:
                core.abort(active[0])
                aborted.add(active[0])

    traces = run_until_idle(core, reqs, on_step=watch)
    t = core.tier
    assert t is not None and len(t) <= capacity
    assert held["GPU"] == set(core.pool.by_hash) and held["CPU"] == set(t.hashes())
    for r in reqs:
        trace = traces[r.request_id]
        if r.request_id in aborted:
            assert trace.finish_reason == "abort"
        elif trace.finish_reason != "error":
            assert trace.finish_reason == "length" and len(trace.token_times) == r.max_tokens
            assert trace.cached_tokens <= len(r.prompt_ids) - 1
    assert core.pool.used == 0 and not core.has_work()
