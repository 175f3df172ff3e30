import copy
import random

import pytest

from infctl.engines import ROOM_RANK_STRIDE, PDEndpoint, get_adapter, new_bootstrap_room
from infctl.errors import EngineError

PREFILL = PDEndpoint(host="10.0.0.7", port=8100, bootstrap_port=9000)
CHAT = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "max_tokens": 256,
    "max_completion_tokens": 256,
    "min_tokens": 8,
    "stream": True,
    "stream_options": {"include_usage": True},
    "temperature": 0.2,
}


def test_vllm_is_sequential_and_pins_dp_ranks_by_header() -> None:
    vllm = get_adapter("vllm")
    assert vllm.pd_style == "sequential"
    assert vllm.dp_rank_header == "x-data-parallel-rank"


def test_vllm_prefill_leg_is_one_token_non_streaming_and_asks_for_remote_decode() -> None:
    original = copy.deepcopy(CHAT)
    body = get_adapter("vllm").prefill_body(CHAT, PREFILL)
    assert original == CHAT  # the client's body is not touched
    assert body["max_tokens"] == 1 and body["max_completion_tokens"] == 1
    assert body["stream"] is False
    assert "stream_options" not in body and "min_tokens" not in body
    assert body["kv_transfer_params"] == {
        "do_remote_decode": True,
        "do_remote_prefill": False,
        "remote_engine_id": None,
        "remote_block_ids": None,
        "remote_host": None,
        "remote_port": None,
    }
    assert body["messages"] == CHAT["messages"] and body["temperature"] == 0.2


def test_vllm_prefill_leg_adds_no_max_completion_tokens_the_client_did_not_send() -> None:
    body = get_adapter("vllm").prefill_body({"model": "m", "prompt": "x"}, PREFILL)
    assert body["max_tokens"] == 1 and "max_completion_tokens" not in body


def test_vllm_decode_leg_is_the_client_body_plus_the_prefill_kv_params_unchanged() -> None:
    params = {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": "e-1",
        "remote_block_ids": [3, 4, 5],
        "remote_host": "10.0.0.7",
        "remote_port": 5600,
        "tp_size": 1,
    }
    prefill_response = {"id": "cmpl-1", "choices": [], "kv_transfer_params": params}
    body = get_adapter("vllm").decode_body(CHAT, prefill_response, PREFILL)
    assert body == {**CHAT, "kv_transfer_params": params}


@pytest.mark.parametrize("response", [None, {"id": "x"}, {"kv_transfer_params": None}])
def test_vllm_decode_leg_without_kv_params_names_the_prefill_engine(
    response: dict[str, object] | None,
) -> None:
    with pytest.raises(EngineError, match=r"10\.0\.0\.7:8100") as err:
        get_adapter("vllm").decode_body(CHAT, response, PREFILL)
    assert err.value.hint and "kv-transfer-config" in err.value.hint


def test_sglang_is_parallel_and_both_legs_carry_the_same_rendezvous() -> None:
    sglang = get_adapter("sglang")
    assert sglang.pd_style == "parallel"
    room = new_bootstrap_room(random.Random(7))
    prefill = sglang.prefill_body(CHAT, PREFILL, room)
    decode = sglang.decode_body(CHAT, None, PREFILL, room)
    assert (
        prefill
        == decode
        == {**CHAT, "bootstrap_host": "10.0.0.7", "bootstrap_port": 9000, "bootstrap_room": room}
    )
    assert "bootstrap_room" not in CHAT


def test_sglang_default_bootstrap_port_and_a_missing_room() -> None:
    sglang = get_adapter("sglang")
    body = sglang.prefill_body({"model": "m"}, PDEndpoint("p", 30000), 5)
    assert body["bootstrap_port"] == 8998
    with pytest.raises(ValueError, match="bootstrap room"):
        sglang.decode_body({"model": "m"}, None, PREFILL)


def test_bootstrap_rooms_are_63_bit_and_reproducible_with_a_seeded_rng() -> None:
    rooms = [new_bootstrap_room(random.Random(s)) for s in range(200)]
    assert all(0 <= r < 2**63 for r in rooms)
    assert len(set(rooms)) == 200
    assert new_bootstrap_room(random.Random(1)) == new_bootstrap_room(random.Random(1))
    assert 0 <= new_bootstrap_room() < 2**63


@pytest.mark.parametrize("ranks", [2, 3, 4, 8, 16, 32, 64])
def test_a_room_for_a_pinned_prefill_rank_leads_sglang_to_that_rank(ranks: int) -> None:
    # SGLang 0.5.15/0.5.23: a PD prefill engine serves a request on rank bootstrap_room % dp_size
    # (follow_bootstrap_room) and its decode engines fetch the KV from that rank; a request pinned to any
    # other rank fails its transfer ("follow_bootstrap_room conflict").
    rng = random.Random(7)
    for rank in range(ranks):
        rooms = [new_bootstrap_room(rng, rank=rank) for _ in range(50)]
        assert all(0 <= room < 2**63 and room % ranks == rank for room in rooms)
        assert len(set(rooms)) == 50
    assert new_bootstrap_room(rank=1) % 8 == 1
    with pytest.raises(ValueError, match="rank"):
        new_bootstrap_room(rank=-1)


@pytest.mark.parametrize("ranks", [17, 19, 23, 25, 34, 1000])
def test_a_room_for_any_rank_count_the_router_knows(ranks: int) -> None:
    # The fallback stride serves only counts that divide it; knowing the engine's count serves any.
    rng = random.Random(3)
    assert ROOM_RANK_STRIDE % ranks != 0
    for rank in (0, 1, ranks - 1):
        rooms = [new_bootstrap_room(rng, rank=rank, ranks=ranks) for _ in range(50)]
        assert all(0 <= room < 2**63 and room % ranks == rank for room in rooms)
        assert len(set(rooms)) == 50
    with pytest.raises(ValueError, match=f"rank {ranks} is out of range"):
        new_bootstrap_room(rank=ranks, ranks=ranks)
    with pytest.raises(ValueError, match="count 0"):
        new_bootstrap_room(rank=0, ranks=0)


def test_sglang_batch_takes_a_room_per_prompt_with_host_and_port_lists() -> None:
    # As sgl-model-gateway's PD router sends a completion batch (routers/http/pd_router.rs,
    # inject_bootstrap_into_value); GenerateReqInput.__getitem__ gives prompt i bootstrap_room[i].
    sglang = get_adapter("sglang")
    body = {"model": "m", "prompt": ["a", "b", "c"]}
    rooms = [11, 22, 33]
    prefill = sglang.prefill_body(body, PREFILL, rooms)
    decode = sglang.decode_body(body, None, PREFILL, rooms)
    assert prefill == decode == {
        **body, "bootstrap_host": ["10.0.0.7"] * 3, "bootstrap_port": [9000] * 3, "bootstrap_room": rooms,
    }  # fmt: skip
