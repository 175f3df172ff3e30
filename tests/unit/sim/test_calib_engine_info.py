"""What the calibration reads of the engine it measures: one rank's KV pool, whatever the data parallelism."""

from __future__ import annotations

from typing import Any

import aiohttp

from infctl.sim.calib_measure import engine_info


async def test_a_data_parallel_engine_s_pool_is_one_rank_s(start_sim: Any) -> None:
    # vLLM 0.32 writes the sum over its ranks on each rank's cache_config_info sample, as the sim now does.
    one = await start_sim(data_parallel_size=1)
    three = await start_sim(data_parallel_size=3)
    async with aiohttp.ClientSession() as session:
        single = await engine_info(session, one.urls[0], None)
        ranks = await engine_info(session, three.urls[0], None)
    assert single.num_gpu_blocks and single.num_gpu_blocks > 0
    assert ranks.num_gpu_blocks == single.num_gpu_blocks
    assert int(ranks.labels["num_gpu_blocks"]) == 3 * single.num_gpu_blocks
