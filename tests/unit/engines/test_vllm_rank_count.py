"""How many data-parallel ranks a vLLM engine serves behind its port: from the command line infctl starts it
with (what render labels its pods with, the router's backends per rank), ``extra_args`` included.

Read in the installed vLLM 0.32.0: the API server fronts ``data_parallel_size_local`` ranks with external or
hybrid load balancing, else ``data_parallel_size`` (``v1/engine/input_processor.py``, the range a pinned
rank must fall in); ``engine/arg_utils.py`` ``create_engine_config`` picks the mode. Each count below was
also checked once against that ``create_engine_config`` on the tiny model (the external cases with
``ModelConfig.is_moe`` forced true: vLLM refuses external load balancing for a dense model).
"""

from __future__ import annotations

from typing import Any

import pytest

from infctl.config import ModelProfile
from infctl.engines import get_adapter, vllm_launch


@pytest.mark.parametrize(
    ("argv", "ranks"),
    [
        ([], 1),
        (["-dp", "4"], 4),
        (["-dp=3"], 3),
        (["--data_parallel_size", "5"], 5),  # FlexibleArgumentParser reads underscores as dashes
        (["--data-parallel-size", "2", "-dp", "4"], 4),  # argparse keeps the last
        # Internal load balancing: -dpl alone (a multi-node leader) still fronts every rank.
        (["-dp", "8", "-dpl", "4"], 8),
        (["-dp", "8", "-dpl", "4", "-dph", "--no-data-parallel-hybrid-lb"], 8),
        (["-dp", "4", "-dph"], 4),  # hybrid without -dpl: vLLM refuses to start
        # Hybrid: the local ranks.
        (["-dp", "8", "-dpl", "4", "--data-parallel-hybrid-lb"], 4),
        (["-dp", "8", "-dpl", "2", "--data-parallel-start-rank", "4"], 2),
        (["-dp", "8", "-dpl=2", "-dpr=0"], 2),
        (["-dp", "4", "-dpl", "4", "-dph"], 4),  # every rank local: hybrid is switched off
        (["-dp", "4", "-dpl", "1", "-dph"], 1),  # one local rank: switched to external
        # External: one rank per API server.
        (["-dp", "4", "--data-parallel-rank", "1"], 1),
        (["-dp", "4", "-dpn=0"], 1),
        (["-dp", "4", "--data-parallel-external-lb", "-dpn", "2"], 1),
        (["-dp", "4", "-dpl", "2", "-dph", "-dpn", "3"], 1),  # a rank makes it external, not hybrid
    ],
)
def test_the_rank_count_is_the_command_line_s_as_vllm_resolves_it(argv: list[str], ranks: int) -> None:
    assert vllm_launch.dp_ranks(["vllm", "serve", "m", *argv]) == ranks


def model(**fields: Any) -> ModelProfile:
    return ModelProfile.model_validate(
        {"engine": "vllm", "model": "m", "pd": {"kv_connector": "nixl"}, **fields}
    )


@pytest.mark.parametrize(
    ("dp", "extra_args", "ranks"),
    [
        (2, ["-dp", "4"], 4),
        (4, ["--data-parallel-size=1"], 1),
        (8, ["-dpl", "4", "--data-parallel-hybrid-lb"], 4),
        (8, ["-dpl", "2", "--data-parallel-start-rank", "2"], 2),
        (4, ["--data-parallel-rank", "0"], 1),
    ],
)
@pytest.mark.parametrize("role", ["both", "prefill", "decode"])
def test_extra_args_that_change_the_ranks_change_the_count(
    dp: int, extra_args: list[str], ranks: int, role: Any
) -> None:
    m = model(data_parallel_size=dp, extra_args=extra_args)
    vllm = get_adapter("vllm")
    assert vllm.dp_ranks(m, role) == ranks
    # The profile's own flag is written before extra_args, so the last flag (the one counted) is theirs.
    argv = vllm.launch_command(m, role=role, port=8000)
    assert argv.index("--data-parallel-size") < len(argv) - len(extra_args)
    assert argv[-len(extra_args) :] == extra_args


def test_the_host_ports_follow_the_data_parallel_size_extra_args_set() -> None:
    # -dp 3 in extra_args: the handshake port is bound and ranks 0..2 each bind the NIXL side channel + r.
    wide = model(extra_args=["-dp", "3"])
    assert vllm_launch.host_port_runs(wide, "decode") == {"dp_rpc": 1, "nixl_side_channel": 3}
    narrow = model(data_parallel_size=2, extra_args=["--data_parallel_size=1"])
    assert vllm_launch.host_port_runs(narrow, "decode") == {"nixl_side_channel": 1}
    assert (
        vllm_launch.host_port_runs(model(data_parallel_size=2, extra_args=["--data_parallel_rpc_port", "9"]))
        == {}
    )
