"""The pool's in-flight accounting: what the policies read as a backend's queued prefill and held KV."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from infctl.router.pool import BackendPool
from infctl.router.snapshot import Backend


def _pool() -> BackendPool:
    return BackendPool([Backend(id="a", url="http://a")])


def _state(pool: BackendPool) -> tuple[int, float, float]:
    s = pool.snapshot(0.0).states["a"]
    return s.inflight, s.queued_tokens, s.inflight_tokens


def test_only_the_uncached_prompt_queues_as_prefill_until_the_first_token() -> None:
    pool = _pool()
    pool.start("a", 4000, 100, cached_tokens=3500)
    assert _state(pool) == (1, 500, 4100)  # the cached 3,500 cost no prefill, but hold KV
    pool.first_token("a", 4000, cached_tokens=3500)
    assert _state(pool) == (1, 0, 4100)
    pool.finish("a", 4000, 100, got_first=True, cached_tokens=3500)
    assert _state(pool) == (0, 0, 0)


def test_a_request_that_fails_before_its_first_token_releases_its_queued_work() -> None:
    pool = _pool()
    pool.start("a", 1000, 10, cached_tokens=200)
    pool.finish("a", 1000, 10, got_first=False, cached_tokens=200)
    assert _state(pool) == (0, 0, 0)


def test_an_estimate_above_the_prompt_queues_nothing_rather_than_a_negative() -> None:
    pool = _pool()
    pool.start("a", 100, 10, cached_tokens=160)  # whole blocks can overshoot the prompt
    assert _state(pool)[1] == 0


@given(
    st.lists(
        st.tuples(st.integers(0, 10_000), st.integers(0, 12_000), st.integers(0, 500), st.booleans()),
        max_size=30,
    )
)
def test_every_request_started_and_finished_leaves_the_backend_idle(
    reqs: list[tuple[int, int, int, bool]],
) -> None:
    pool = _pool()
    for prompt, cached, out, _ in reqs:
        pool.start("a", prompt, out, cached_tokens=cached)
    for prompt, cached, out, first in reqs:
        if first:
            pool.first_token("a", prompt, cached_tokens=cached)
        pool.finish("a", prompt, out, got_first=first, cached_tokens=cached)
    assert _state(pool) == (0, 0, 0)


def test_a_backend_removed_and_re_added_mid_request_keeps_counting_it() -> None:
    pool = _pool()
    pool.start("a", 1000, 100, cached_tokens=200)
    backend = pool.remove("a")
    assert backend is not None
    pool.add(backend)
    assert _state(pool) == (1, 800, 1100)  # the engine still runs that request
    pool.start("a", 500, 50)
    pool.finish("a", 1000, 100, got_first=False, cached_tokens=200)  # the first request ends
    assert _state(pool) == (1, 500, 550)  # the second is still counted (was 0: an undercount)
    pool.finish("a", 500, 50, got_first=False)
    assert _state(pool) == (0, 0, 0)


def test_a_removed_backend_is_forgotten_once_its_last_request_finishes() -> None:
    pool = _pool()
    pool.start("a", 10, 1)
    backend = pool.remove("a")
    assert backend is not None
    pool.first_token("a", 10)
    pool.finish("a", 10, 1, got_first=True)
    pool.add(backend)  # back after its requests ended: starts from nothing
    assert _state(pool) == (0, 0, 0)
    assert pool.remove("a") is not None and pool.remove("a") is None
    pool.add(backend)
    assert _state(pool) == (0, 0, 0)  # removed idle: nothing was kept
