"""An engine's reported data-parallel rank count, taken by its backends in the router's pool: the count an
SGLang PD prefill's bootstrap rooms are drawn modulo (``router.engine_ranks`` reads it)."""

from __future__ import annotations

from infctl.router import Backend
from infctl.router.pool import BackendPool

URL = "http://10.0.0.7:30000"


def ranks(pool: BackendPool) -> list[tuple[int | None, bool]]:
    return [(b.dp_size, b.routable) for b in pool.snapshot(0.0).backends]


def test_the_engine_s_count_replaces_what_the_backends_were_given() -> None:
    pool = BackendPool(
        [Backend(f"p{r}", url=URL, role="prefill", dp_rank=r, dp_size=2) for r in range(4)]
        + [Backend("other", url="http://10.0.0.8:30000", role="prefill", dp_rank=0, dp_size=2)],
        engine="sglang",
    )
    changed = pool.record_dp_ranks(URL, 3)
    assert [(b.id, b.dp_size, given) for b, given in changed] == [(f"p{r}", 3, 2) for r in range(4)]
    # p3 pins a rank the engine lacks: out of rotation.
    assert ranks(pool) == [(3, True), (3, True), (3, True), (3, False), (2, True)]
    assert pool.record_dp_ranks(URL, 3) == []  # read again: nothing changed, nothing to say
    row = pool.describe(0.0)[0]
    assert (row["dp_size"], row["dp_size_given"], row["dp_size_engine"]) == (3, 2, 3)


def test_a_backend_redefined_or_added_later_takes_the_engine_s_count() -> None:
    pool = BackendPool([Backend("p0", url=URL, role="prefill", dp_rank=0)], engine="sglang")
    assert [(b.id, given) for b, given in pool.record_dp_ranks(URL, 4)] == [("p0", None)]
    pool.add(Backend("p0", url=URL, role="prefill", dp_rank=0, dp_size=8))  # an admin PUT, or discovery
    pool.add(Backend("p1", url=URL, role="prefill", dp_rank=1))
    assert ranks(pool) == [(4, True), (4, True)]
    assert pool.describe(0.0)[0]["dp_size_given"] == 8


def test_an_engine_whose_backends_all_left_is_read_anew() -> None:
    pool = BackendPool([Backend("p0", url=URL, role="prefill", dp_rank=0)], engine="sglang")
    pool.record_dp_ranks(URL, 4)
    pool.remove("p0")
    assert pool.engine_ranks(URL) is None
    pool.add(Backend("p0", url=URL, role="prefill", dp_rank=0, dp_size=2))
    assert ranks(pool) == [(2, True)]
