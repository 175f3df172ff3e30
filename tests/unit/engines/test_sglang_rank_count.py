"""How many data-parallel ranks an SGLang engine serves: from the command line it is started with (what
render labels its pods with) and from what it reports at ``/server_info`` (what the router reads). An SGLang
PD prefill serves each request on rank ``bootstrap_room % count``, so both must be the engine's own count.

Read in the released wheels: 0.5.15 (``DataParallelController.workers`` has ``dp_size`` entries, DP attention
or not; ``/server_info`` is ``dataclasses.asdict(server_args)``) and 0.5.22/0.5.23 (``num_dp_ranks_of`` is
``dp_size * attn_dp_size``; ``handle_deprecated_dp_attention`` turns ``--dp-size N --enable-dp-attention``
into ``attn_dp_size`` N, ``dp_size`` 1; ``/server_info`` is ``build_server_info``, the resolved fields).
"""

from __future__ import annotations

from typing import Any

import pytest

from infctl.config import ModelProfile
from infctl.engines import get_adapter, sglang_launch


@pytest.mark.parametrize(
    ("argv", "ranks"),
    [
        ([], 1),
        (["--dp-size", "4"], 4),
        (["--data-parallel-size=3"], 3),
        (["--dp-size", "4", "--enable-dp-attention"], 4),  # 0.5.15: dp_size; 0.5.23: attn_dp_size 4
        (["--attn-dp-size", "4"], 4),
        (["--attention-data-parallel-size", "8"], 8),
        (["--dp-size", "1", "--attn-dp-size", "4", "--enable-dp-attention"], 4),
        (["--dp-size", "4", "--dp-size", "2"], 2),  # argparse keeps the last
        (["--attn-dp-size", "4", "--dp-size", "1"], 4),
    ],
)
def test_the_rank_count_is_the_command_line_s_as_sglang_resolves_it(argv: list[str], ranks: int) -> None:
    assert sglang_launch.dp_ranks(["python3", "-m", "sglang.launch_server", *argv]) == ranks


def model(**fields: Any) -> ModelProfile:
    return ModelProfile.model_validate(
        {"engine": "sglang", "model": "m", "pd": {"transfer_backend": "mooncake"}, **fields}
    )


@pytest.mark.parametrize("image", [None, "lmsysorg/sglang:v0.5.21", "lmsysorg/sglang:v0.5.23", "x:latest"])
@pytest.mark.parametrize("dp_attention", [False, True])
def test_every_spelling_infctl_renders_serves_its_ranks(image: str | None, dp_attention: bool) -> None:
    m = model(data_parallel_size=4, dp_attention=dp_attention, image=image)
    assert get_adapter("sglang").dp_ranks(m, "prefill") == 4


def test_extra_args_that_change_the_ranks_change_the_count() -> None:
    sglang = get_adapter("sglang")
    assert sglang.dp_ranks(model(data_parallel_size=4, extra_args=["--dp-size", "8"]), "prefill") == 8
    newer = model(image="lmsysorg/sglang:v0.5.23", extra_args=["--attn-dp-size", "2"])
    assert sglang.dp_ranks(newer, "prefill") == 2
    # A profile's count for vLLM is its --data-parallel-size (it draws no rooms).
    vllm = ModelProfile(engine="vllm", model="m", data_parallel_size=3)
    assert get_adapter("vllm").dp_ranks(vllm, "both") == 3


@pytest.mark.parametrize(
    ("info", "ranks"),
    [
        ({"dp_size": 4, "enable_dp_attention": False, "version": "0.5.15"}, 4),
        ({"dp_size": 4, "enable_dp_attention": True, "version": "0.5.15"}, 4),
        ({"dp_size": 1, "attn_dp_size": 4, "enable_dp_attention": True, "version": "0.5.23"}, 4),
        ({"dp_size": 2, "attn_dp_size": 1, "enable_dp_attention": False, "version": "0.5.23"}, 2),
        ({"dp_size": 1, "attn_dp_size": 1}, 1),
        ({"tp_size": 2}, None),
        ({"dp_size": True}, None),
        ({"dp_size": 0}, None),
        ({"dp_size": 2, "attn_dp_size": "4"}, None),
        ([], None),
    ],
)
def test_server_info_reports_the_rank_count(info: object, ranks: int | None) -> None:
    assert get_adapter("sglang").reported_dp_ranks(info) == ranks


def test_server_info_is_read_at_the_current_path_first() -> None:
    assert get_adapter("sglang").diagnostics.server_info_paths == ("/server_info", "/get_server_info")
    assert get_adapter("vllm").reported_dp_ranks({"dp_size": 4}) is None
