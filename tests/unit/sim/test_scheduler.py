from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infctl.sim.profiles import SimProfile, get_profile
from infctl.sim.scheduler import EngineCore
from infctl.sim.types import BlockRemoved, BlockStored, SimRequest, StepOutput
from infctl.sim.virtual import run_until_idle
from infctl.tokens import block_hashes, output_word, synth_words, token_ids

TINY = get_profile("tiny-cpu")


def prompt(n: int, salt: int = 0) -> list[int]:
    return token_ids(synth_words(n, salt=salt))


def req(rid: str, ids: list[int], max_tokens: int = 4, arrival: float = 0.0, **kw: object) -> SimRequest:
    return SimRequest(rid, ids, max_tokens, arrival, **kw)  # type: ignore[arg-type]


def check_invariants(core: EngineCore) -> None:
    pool = core.pool
    refs = [0] * pool.num_blocks
    for blocks in core.block_tables().values():
        assert len(set(blocks)) == len(blocks)
        for blk in blocks:
            refs[blk] += 1
    assert pool.ref == refs
    assert min(pool.ref) >= 0
    free = pool.free_queue()
    assert len(set(free)) == len(free)
    assert set(free) == {b for b in range(pool.num_blocks) if refs[b] == 0}
    assert pool.used + pool.num_free == pool.num_blocks
    assert all(pool.block_hash[b] == h for h, b in pool.by_hash.items())
    assert core.stats().running <= core.profile.max_num_seqs


# -- prefix caching -------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [10, 16, 17, 100, 128, 129])
def test_repeated_prompt_hits_all_full_blocks_but_the_last_token(length: int) -> None:
    core = EngineCore(TINY)
    ids = prompt(length)
    first = run_until_idle(core, [req("a", ids)])
    second = run_until_idle(core, [req("b", ids, arrival=1.0)])
    want = (length - 1) // TINY.block_size * TINY.block_size
    assert first["a"].cached_tokens == 0
    assert second["b"].cached_tokens == want
    stats = core.stats()
    assert stats.prefix_queries == 2 * length and stats.prefix_hits == want
    assert stats.prompt_tokens == 2 * length and stats.generation_tokens == 8


def test_a_prompt_admitted_in_the_same_step_hits_the_blocks_scheduled_before_it() -> None:
    # vLLM caches a request's blocks as it schedules them (allocate_slots), so the later sequences of an
    # n > 1 request, or identical prompts arriving together, hit them in the step that computes them: seen
    # on vLLM 0.32 (CPU, block 128), n: 3 on a 300-token prompt counted 900 queries and 512 hits.
    core = EngineCore(TINY)
    ids = prompt(40)
    got = run_until_idle(core, [req(rid, ids) for rid in "abc"])
    assert [got[rid].cached_tokens for rid in "abc"] == [0, 32, 32]
    stats = core.stats()
    assert stats.prefix_queries == stats.prompt_tokens == 120 and stats.prefix_hits == 64


def test_cached_prefix_shortens_ttft_by_the_cached_tokens() -> None:
    core = EngineCore(TINY)
    ids = prompt(1000)
    cold = run_until_idle(core, [req("a", ids)])["a"].ttft
    warm = run_until_idle(core, [req("b", ids, arrival=10.0)])["b"].ttft
    assert cold == pytest.approx(TINY.expected_ttft(1000))
    assert warm == pytest.approx(TINY.expected_ttft(1000, cached_tokens=992))


def test_block_stored_events_carry_the_convention_hashes() -> None:
    core = EngineCore(TINY, kv_events=True)
    ids = prompt(40)
    core.add_request(req("a", ids, max_tokens=1), 0.0)
    out = core.step(0.0)
    want = block_hashes(ids, 16, TINY.model)
    assert out.kv_events == [BlockStored(want, None, ids[:32], 16)]


def test_generated_full_blocks_are_cached_for_the_next_turn() -> None:
    core = EngineCore(TINY, kv_events=True)
    ids = prompt(20)
    run_until_idle(core, [req("a", ids, max_tokens=30, seed=3)])
    # The next turn repeats the conversation: prompt + 29 generated tokens with KV (49 -> 3 full blocks).
    turn2 = ids + [token_ids(output_word(3, i))[0] for i in range(30)] + prompt(10, salt=9)
    b = run_until_idle(core, [req("b", turn2, arrival=5.0)])["b"]
    assert b.cached_tokens == 48


def test_hash_seed_and_disabled_cache() -> None:
    ids = prompt(64)
    a = EngineCore(TINY, kv_events=True, hash_seed="other")
    a.add_request(req("a", ids, max_tokens=1), 0.0)
    (stored,) = a.step(0.0).kv_events
    assert isinstance(stored, BlockStored)
    assert stored.block_hashes == block_hashes(ids, 16, "other")

    off = EngineCore(TINY.with_overrides(enable_prefix_caching=False), kv_events=True)
    run_until_idle(off, [req("a", ids)])
    run_until_idle(off, [req("b", ids, arrival=1.0)])
    assert off.stats().prefix_hits == 0 and off.pool.by_hash == {}


def test_eviction_is_lru_and_reported() -> None:
    # 8 blocks of 16 tokens: each 48-token request (+1 KV token of output) needs 4 blocks.
    core = EngineCore(TINY.with_overrides(num_gpu_blocks=8), kv_events=True)
    a, b, c = prompt(48, 1), prompt(48, 2), prompt(48, 3)
    removed: list[int] = []

    def collect(_: float, out: StepOutput) -> None:
        removed.extend(h for e in out.kv_events if isinstance(e, BlockRemoved) for h in e.block_hashes)

    run_until_idle(core, [req("a", a, max_tokens=2)], on_step=collect)
    run_until_idle(core, [req("b", b, max_tokens=2, arrival=1.0)], on_step=collect)
    assert removed == []
    run_until_idle(core, [req("c", c, max_tokens=2, arrival=2.0)], on_step=collect)
    # c takes a's blocks (least recently freed), a's tail block first.
    assert removed == list(reversed(block_hashes(a, 16, TINY.model)))
    # b is still cached, a is gone.
    hits = run_until_idle(core, [req("b2", b, arrival=3.0), req("a2", a, arrival=3.0)])
    assert hits["b2"].cached_tokens == 32 and hits["a2"].cached_tokens == 0


# -- batching and timing ----------------------------------------------------------------------------------


def test_chunked_prefill_spans_ceil_len_over_budget_steps() -> None:
    core = EngineCore(TINY)
    n = 4000
    durations: list[float] = []
    trace = run_until_idle(
        core, [req("a", prompt(n), max_tokens=1)], on_step=lambda t, o: durations.append(o.duration)
    )
    assert len(durations) == math.ceil(n / TINY.max_num_batched_tokens)
    assert trace["a"].ttft == pytest.approx(sum(durations))
    assert trace["a"].ttft == pytest.approx(TINY.expected_ttft(n))


@pytest.mark.parametrize("batch", [1, 16])
def test_decode_itl_matches_the_formula(batch: int) -> None:
    core = EngineCore(TINY.with_overrides(max_num_seqs=batch))
    traces = run_until_idle(core, [req(f"r{i}", prompt(32, salt=i), max_tokens=6) for i in range(batch)])
    for t in traces.values():
        assert t.ttft == pytest.approx(TINY.step_time(32 * batch, 0, 0))
        # The k-th decode step attends over the prompt plus the k tokens generated so far.
        assert t.itls == pytest.approx([TINY.expected_itl(batch, context=32 + k) for k in range(1, 6)])


def test_decode_itl_at_batch_64_on_llama() -> None:
    p = get_profile("llama3-8b-h100")
    core = EngineCore(p)
    traces = run_until_idle(core, [req(f"r{i}", prompt(64, salt=i), max_tokens=5) for i in range(64)])
    for t in traces.values():
        assert t.itls == pytest.approx([p.expected_itl(64)] * 4)
        assert t.itls[0] == pytest.approx((5753 + 6.0 * 64) * 1e-6)


def test_decodes_and_a_prefill_chunk_share_a_step() -> None:
    core = EngineCore(TINY)
    core.add_request(req("a", prompt(10), max_tokens=10), 0.0)
    core.step(0.0)
    core.add_request(req("b", prompt(3000, salt=1), max_tokens=1), 0.0)
    out = core.step(0.0)
    assert out.decode_seqs == 1 and out.prefill_tokens == TINY.max_num_batched_tokens - 1
    assert out.duration == pytest.approx(TINY.step_time(TINY.max_num_batched_tokens - 1, 1, 11))


def test_fcfs_and_max_num_seqs() -> None:
    core = EngineCore(TINY.with_overrides(max_num_seqs=2))
    reqs = [req(f"r{i}", prompt(20, salt=i), max_tokens=3, arrival=i * 1e-6) for i in range(6)]
    seen_running: list[int] = []
    traces = run_until_idle(core, reqs, on_step=lambda t, o: seen_running.append(core.stats().running))
    assert max(seen_running) <= 2
    firsts = [traces[f"r{i}"].token_times[0] for i in range(6)]
    assert firsts == sorted(firsts)
    assert all(len(t.token_times) == 3 and t.finish_reason == "length" for t in traces.values())


# -- KV pressure ------------------------------------------------------------------------------------------


def test_preemption_under_kv_pressure_still_finishes_every_request() -> None:
    profile = TINY.with_overrides(num_gpu_blocks=48)
    core = EngineCore(profile)
    reqs = [req(f"r{i}", prompt(100, salt=i), max_tokens=150) for i in range(8)]
    preempted: list[str] = []

    def watch(_: float, out: StepOutput) -> None:
        preempted.extend(out.preempted)
        check_invariants(core)

    traces = run_until_idle(core, reqs, on_step=watch)
    assert core.stats().preemptions == len(preempted) > 0
    for t in traces.values():
        assert len(t.token_times) == 150 and t.finish_reason == "length"
    assert core.stats().generation_tokens == 8 * 150
    assert core.pool.used == 0


def test_preempted_request_goes_back_to_the_front_of_the_queue() -> None:
    # 6 blocks: a, b, c take 2 each; d waits. At token 33 a needs a third block: c (admitted last) is
    # preempted, and it is readmitted ahead of d, which has been waiting longer.
    core = EngineCore(TINY.with_overrides(num_gpu_blocks=6))
    reqs = [req(x, prompt(30, salt=k), max_tokens=40) for k, x in enumerate("abcd")]
    log: list[tuple[list[str], list[str]]] = []  # (event request ids in admission order, preempted)
    traces = run_until_idle(
        core, reqs, on_step=lambda t, o: log.append(([e.request_id for e in o.events], o.preempted))
    )
    at = next(i for i, (_, preempted) in enumerate(log) if preempted)
    assert log[at][1] == ["c"]
    readmitted = next(ids for ids, _ in log[at + 1 :] if "c" in ids or "d" in ids)
    assert readmitted.index("c") < readmitted.index("d") if "d" in readmitted else "c" in readmitted
    assert all(len(t.token_times) == 40 for t in traces.values())


def test_prompt_that_can_never_fit_finishes_with_error() -> None:
    core = EngineCore(TINY.with_overrides(num_gpu_blocks=4))
    traces = run_until_idle(core, [req("big", prompt(100)), req("ok", prompt(20), arrival=0.1)])
    assert traces["big"].finish_reason == "error" and traces["big"].token_times == []
    assert traces["ok"].finish_reason == "length"


def test_lengths_beyond_max_model_len_and_duplicates_are_refused() -> None:
    core = EngineCore(TINY)
    with pytest.raises(ValueError):
        core.add_request(req("x", prompt(4000), max_tokens=200), 0.0)
    core.add_request(req("y", prompt(10)), 0.0)
    with pytest.raises(ValueError):
        core.add_request(req("y", prompt(10)), 0.0)


# -- abort ------------------------------------------------------------------------------------------------


def test_abort_frees_blocks_and_is_reported_by_the_next_step() -> None:
    core = EngineCore(TINY)
    core.add_request(req("a", prompt(100), max_tokens=50), 0.0)
    core.add_request(req("b", prompt(100, 1), max_tokens=50), 0.0)
    core.step(0.0)
    used = core.pool.used
    core.abort("a")
    core.abort("nope")
    assert core.pool.used < used
    out = core.step(1.0)
    assert (
        out.events[0].request_id == "a" and out.events[0].finish_reason == "abort" and out.events[0].finished
    )
    assert {e.request_id for e in out.events[1:]} == {"b"}
    check_invariants(core)


def test_abort_of_a_queued_request() -> None:
    core = EngineCore(TINY.with_overrides(max_num_seqs=1))
    core.add_request(req("a", prompt(10), max_tokens=5), 0.0)
    core.add_request(req("b", prompt(10, 1), max_tokens=5), 0.0)
    core.abort("b")
    assert core.stats().waiting == 1
    traces = run_until_idle(core, [])
    assert traces == {}
    assert not core.has_work()


# -- PD roles -------------------------------------------------------------------------------------------


def test_remote_prefill_waits_for_the_transfer_then_decodes() -> None:
    core = EngineCore(TINY, role="decode")
    n = 500
    transfer = n * TINY.kv_bytes_per_token / (TINY.kv_transfer_gbps * 1e9)
    core.add_request(req("a", prompt(n), max_tokens=3, remote_prefill=True), 0.0)
    idle = core.step(0.0)
    assert idle.duration == 0 and idle.events == []
    assert core.next_ready_time() == pytest.approx(transfer)
    assert core.stats().waiting == 1 and core.stats().running == 0
    ready = core.next_ready_time()
    assert ready is not None
    first = core.step(ready)
    assert first.prefill_tokens == 0 and first.decode_seqs == 1
    assert first.duration == pytest.approx(TINY.expected_itl(1, context=n))
    (ev,) = first.events
    assert ev.new_tokens == 1 and ev.cached_tokens == n


def test_remote_prefill_counts_its_prompt_as_transferred_but_the_last_token() -> None:
    """vLLM's prompt_tokens_by_source: a NIXL decode gets all but the last prompt token's KV from the prefill
    engine (external_kv_transfer) and computes that one; a local prefix hit is the local cache's."""
    core = EngineCore(TINY, role="decode")
    ids = prompt(500)
    run_until_idle(core, [req("a", ids, remote_prefill=True)])
    run_until_idle(core, [req("b", ids, remote_prefill=True, arrival=1.0)])
    stats = core.stats()
    hit = 499 // TINY.block_size * TINY.block_size
    assert stats.prompt_tokens == 1000 and stats.prompt_local_hits == hit
    assert stats.prompt_external == 499 + (499 - hit)


def test_remote_prefill_does_not_block_other_work() -> None:
    core = EngineCore(TINY, role="decode")
    reqs = [
        req("local", prompt(20), max_tokens=40),
        req("remote", prompt(2000, 1), max_tokens=2, arrival=0.001, remote_prefill=True),
    ]
    traces = run_until_idle(core, reqs)
    transfer = 2000 * TINY.kv_bytes_per_token / (TINY.kv_transfer_gbps * 1e9)
    remote = traces["remote"]
    assert remote.ttft is not None and remote.ttft >= transfer
    assert remote.cached_tokens == 2000 and len(remote.token_times) == 2
    # The local request kept decoding meanwhile: no step carried a 2000-token prefill.
    assert max(traces["local"].itls) < TINY.step_time(100, 2, 10_000)
    assert core.stats().prompt_tokens == 2020


def test_remote_prefill_is_computed_on_a_prefill_role() -> None:
    core = EngineCore(TINY, role="prefill")
    core.add_request(req("a", prompt(100), max_tokens=1, remote_prefill=True), 0.0)
    out = core.step(0.0)
    assert out.prefill_tokens == 100 and out.events[0].finished


def test_idle_engine_with_pending_transfer_and_admissible_queue_says_step_now() -> None:
    core = EngineCore(TINY, role="decode")
    core.add_request(req("r", prompt(500), max_tokens=2, remote_prefill=True), 0.0)
    assert core.next_ready_time() is not None
    core.add_request(req("l", prompt(10, 1), max_tokens=2), 0.0)
    assert core.next_ready_time() is None


# -- properties -----------------------------------------------------------------------------------------

PREFIXES = [prompt(64, salt=100 + k) for k in range(3)]

request_specs = st.lists(
    st.tuples(
        st.integers(0, 2),  # shared prefix
        st.integers(0, 64),  # how much of it
        st.integers(1, 40),  # unique tail
        st.integers(1, 30),  # max_tokens
        st.floats(0, 0.05),  # arrival
        st.booleans(),  # remote prefill
    ),
    min_size=1,
    max_size=14,
)


@settings(max_examples=120, deadline=None)
@given(
    specs=request_specs,
    blocks=st.integers(6, 40),
    block_size=st.sampled_from([4, 16]),
    max_seqs=st.integers(1, 6),
    budget=st.integers(6, 80),
    role=st.sampled_from(["both", "decode"]),
    abort_every=st.integers(0, 7),
)
def test_random_workloads_keep_the_pool_consistent_and_finish(
    specs: list[tuple[int, int, int, int, float, bool]],
    blocks: int,
    block_size: int,
    max_seqs: int,
    budget: int,
    role: str,
    abort_every: int,
) -> None:
    profile: SimProfile = TINY.with_overrides(
        num_gpu_blocks=blocks, block_size=block_size, max_num_seqs=max_seqs, max_num_batched_tokens=budget
    )
    core = EngineCore(profile, role=role, kv_events=True)  # type: ignore[arg-type]
    reqs = [
        req(f"r{i}", PREFIXES[p][:m] + prompt(tail, salt=i), max_tokens=n, arrival=t, remote_prefill=remote)
        for i, (p, m, tail, n, t, remote) in enumerate(specs)
    ]
    aborted: set[str] = set()
    steps = [0]
    stored: set[int] = set()

    def watch(_: float, out: StepOutput) -> None:
        check_invariants(core)
        for e in out.kv_events:
            if isinstance(e, BlockStored):
                assert not stored & set(e.block_hashes)
                stored.update(e.block_hashes)
            else:
                assert set(e.block_hashes) <= stored
                stored.difference_update(e.block_hashes)
        steps[0] += 1
        if abort_every and steps[0] % abort_every == 0:
            active = sorted(core.block_tables())
            if active:
                core.abort(active[0])
                aborted.add(active[0])

    traces = run_until_idle(core, reqs, on_step=watch)
    assert stored == set(core.pool.by_hash)
    for r in reqs:
        t = traces[r.request_id]
        if r.request_id in aborted:
            assert t.finish_reason == "abort"
        elif t.finish_reason == "error":
            assert math.ceil((len(r.prompt_ids) + r.max_tokens - 1) / block_size) > blocks
        else:
            assert t.finish_reason == "length" and len(t.token_times) == r.max_tokens
            assert t.token_times == sorted(t.token_times)
    assert core.pool.used == 0 and not core.has_work()
