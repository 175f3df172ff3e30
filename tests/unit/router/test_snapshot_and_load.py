"""Snapshot records, stable hashing and the load gate arithmetic."""

from __future__ import annotations

import math

from routerkit import STALE, fresh, request, snap

from infctl.router import Backend, BackendState, RequestInfo, build_policy
from infctl.router.hashing import mix, rendezvous, stable_hash
from infctl.router.kv_chain import HASH_SEED
from infctl.router.policies.filters import load_limit
from infctl.router.policies.scorers import shared_depth
from infctl.router.settings import PolicySettings
from infctl.tokens import block_hashes, token_ids


def test_hashes_are_the_same_in_every_process() -> None:
    # Literal values: router replicas on other machines must compute exactly these.
    assert stable_hash("backend-a") == 9702947213325460713
    assert mix(1, 2) == 13757245211066428519
    assert Backend("backend-a").key == stable_hash("backend-a")


def test_rendezvous_skips_zero_weights_and_reports_none() -> None:
    assert rendezvous(7, [1, 2, 3], [0.0, 0.0, 1.0]) == 2
    assert rendezvous(7, [1, 2], [0.0, 0.0]) == -1


def test_request_hashes_chain_the_token_ids_from_the_routers_seed_whatever_the_model() -> None:
    text = " ".join(f"w{i}" for i in range(40))
    req = RequestInfo.from_text("x", text, block_size=16, model="llama")
    assert (req.prompt_tokens, req.num_blocks) == (40, 2)
    assert list(req.block_hashes) == block_hashes(token_ids(text), 16, HASH_SEED)
    assert req.block_hashes == RequestInfo.from_text("x", text, block_size=16, model="other").block_hashes
    assert req.key == stable_hash("x")


def test_backend_replace_keeps_its_key() -> None:
    from dataclasses import replace

    b = replace(Backend("a"), ejected=True)
    assert b.key == stable_hash("a") and not b.routable


def test_missing_or_old_signals_are_stale() -> None:
    limit = PolicySettings().stale_after_s
    assert BackendState().is_stale(limit)
    assert STALE.is_stale(limit)
    assert not fresh(age=0.2).is_stale(limit) and fresh(age=0.21).is_stale(limit)
    assert snap([Backend("a")], {}).state("a").is_stale(limit)


def test_load_limit_switches_from_band_to_least_loaded_when_imbalanced() -> None:
    # Balanced: AIBrix band, mean + 1 sigma + slack.
    assert math.isclose(load_limit([4, 6, 4, 6], 8, 1.5, 1.0, 1.0), 5 + 1 + 1)
    # max - min > 8 and max > 1.5 min: only the least loaded (plus slack) stay.
    assert load_limit([2, 3, 30], 8, 1.5, 1.0, 1.0) == 3
    # A large spread that is not a large ratio (all busy) stays on the band.
    assert load_limit([100, 110], 8, 1.5, 1.0, 1.0) > 110


def test_shared_depth_needs_a_quorum_of_at_least_two() -> None:
    assert shared_depth([128, 128, 128, 0], 0.5) == 128  # the system prompt on 3 of 4 is a commodity
    assert shared_depth([128, 0, 0, 0], 0.5) == 0  # on 1 of 4 it is still affinity
    assert shared_depth([50, 10], 0.5) == 10  # two candidates: only what both hold
    assert shared_depth([50], 0.5) == 0
    assert shared_depth([40, 30, 20, 10], 1.0) == 10


def test_not_saturated_filter_prefers_headroom() -> None:
    policy = build_policy({"preset": "least_load", "filters": ["role", "not_saturated"]})
    backends = [Backend("a"), Backend("b")]
    states = {"a": fresh(queue=6, running=0), "b": fresh(queue=1, running=30, kv=0.5)}
    assert policy.decide(snap(backends, states), request()).backend_id == "b"
