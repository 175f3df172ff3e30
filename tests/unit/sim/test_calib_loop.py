"""The calibration's simulated engine (a child ``infctl sim``) counts prompts with the tokenizer it is given,
as the real engine it is compared with does."""

from __future__ import annotations

import random
from pathlib import Path

import aiohttp
from tokenizerkit import chinese, tiny_tokenizer

from infctl.sim.calib_loop import simulated_engine
from infctl.sim.calib_measure import engine_info
from infctl.sim.profiles import TINY_CPU
from infctl.tokenization import load_tokenizer

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests


async def test_the_child_simulator_counts_with_the_given_tokenizer(tiny_tokenizer: Path) -> None:
    text = chinese(random.Random(4), 300)
    async with (
        aiohttp.ClientSession() as session,
        simulated_engine(TINY_CPU, session, tokenizer=str(tiny_tokenizer)) as url,
    ):
        model = (await engine_info(session, url, None)).model
        body = {"model": model, "prompt": text, "max_tokens": 1}
        async with session.post(f"{url}/v1/completions", json=body) as resp:
            assert resp.status == 200, await resp.text()
            usage = (await resp.json())["usage"]
    exact = load_tokenizer(str(tiny_tokenizer)).count(text)
    assert usage["prompt_tokens"] == exact
    assert exact > 150  # hundreds of tokens, where whitespace words would count a handful
