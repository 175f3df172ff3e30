"""The engine's rule for decode engines, applied where every backend enters the router: its pool."""

from __future__ import annotations

from dataclasses import replace

import pytest
from routerkit import fresh, request, snap

from infctl.engines import ENGINES
from infctl.router import Backend, NoBackendError, build_policy
from infctl.router.pool import BackendPool


def _can_prefill(pool: BackendPool, backend_id: str) -> bool:
    return pool.snapshot(0.0).by_id[backend_id].decode_can_prefill


def test_adapters_say_whether_a_decode_engine_serves_alone() -> None:
    assert {name: a.decode_serves_alone for name, a in ENGINES.items()} == {"vllm": True, "sglang": False}


def test_an_sglang_decode_cannot_prefill_whichever_way_it_is_named() -> None:
    pool = BackendPool(
        [
            Backend("d-default", role="decode"),  # the router's engine
            Backend("d-sglang", role="decode", engine="sglang"),
            Backend("d-vllm", role="decode", engine="vllm"),
            Backend("x", role="both"),
        ],
        engine="sglang",
    )
    assert [_can_prefill(pool, b) for b in ("d-default", "d-sglang", "d-vllm", "x")] == [
        False,
        False,
        True,
        True,
    ]
    assert pool.describe(0.0)[0]["decode_can_prefill"] is False
    assert pool.describe(0.0)[3]["decode_can_prefill"] is None  # not a decode backend


def test_a_redefined_or_drained_backend_keeps_the_rule() -> None:
    pool = BackendPool([], engine="vllm")
    pool.add(Backend("d", role="decode", engine="sglang"))
    pool.set_draining("d")
    pool.set_draining("d", False)
    assert not _can_prefill(pool, "d")
    pool.add(replace(pool.backend("d"), engine="vllm", decode_can_prefill=True))  # an admin PUT
    assert _can_prefill(pool, "d")
    pool.add(Backend("d", role="decode", engine="vllm", decode_can_prefill=False))  # the caller's word
    assert not _can_prefill(pool, "d")


def test_without_an_engine_the_pool_takes_backends_as_given() -> None:
    pool = BackendPool([Backend("d", role="decode", engine="sglang")])
    assert _can_prefill(pool, "d")


def test_a_whole_request_never_goes_to_a_decode_that_cannot_prefill() -> None:
    # A policy that lets decode engines take whole requests (no prefill backend in the fleet).
    policy = build_policy(
        {"preset": "least_load", "filters": [{"name": "role", "roles": ["both", "decode"]}]}
    )
    capable = Backend("d-vllm", role="decode")
    refusing = Backend("d-sglang", role="decode", decode_can_prefill=False)
    busy = {"d-vllm": fresh(inflight=50), "d-sglang": fresh()}
    assert policy.decide(snap([capable, refusing], busy), request()).backend_id == "d-vllm"
    with pytest.raises(NoBackendError) as err:
        policy.decide(snap([refusing]), request())
    assert err.value.reason == "no_role"
