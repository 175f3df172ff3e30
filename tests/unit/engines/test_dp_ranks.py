"""What each engine reads to tell data-parallel ranks apart and to pin a request to one."""

from __future__ import annotations

import pytest

from infctl.engines import ENGINES, get_adapter
from infctl.engines import sglang as sglang_names
from infctl.engines import vllm as vllm_names


def test_vllm_pins_by_header_only_and_labels_every_series_with_engine() -> None:
    vllm = get_adapter("vllm")
    pin = vllm.pin_rank(3)
    assert dict(pin.headers) == {"x-data-parallel-rank": "3"}
    assert not pin.body  # the client's bytes can be forwarded as they came
    assert vllm.dp_rank_label == vllm_names.ENGINE_LABEL == "engine"


def test_sglang_pins_by_body_field_for_0_5_and_header_for_newer_releases() -> None:
    sglang = get_adapter("sglang")
    pin = sglang.pin_rank(1)
    assert dict(pin.body) == {"data_parallel_rank": 1}
    assert isinstance(pin.body["data_parallel_rank"], int)  # SGLang's pydantic field is Optional[int]
    assert dict(pin.headers) == {"x-data-parallel-rank": "1"}
    assert sglang.dp_rank_label == sglang_names.DP_RANK_LABEL == "dp_rank"


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_pin_names_the_rank_it_was_asked_for(name: str) -> None:
    adapter = get_adapter(name)
    for rank in (0, 5):
        pin = adapter.pin_rank(rank)
        assert pin.headers or pin.body
        assert all(v == str(rank) for v in pin.headers.values())
        assert all(v == rank for v in pin.body.values())
        if adapter.dp_rank_header is not None:
            assert pin.headers[adapter.dp_rank_header] == str(rank)
