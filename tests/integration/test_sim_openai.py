"""The official ``openai`` SDK against the simulated engine: streaming chat, usage, errors."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from infctl import tokens


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_openai_sdk_streams_chat(start_sim: Any, personality: str) -> None:
    cluster = await start_sim(personality=personality)
    model = cluster.instances[0].model
    client = openai.AsyncOpenAI(base_url=f"{cluster.urls[0]}/v1", api_key="x")
    try:
        stream = await client.chat.completions.create(
            model=model,
            messages=[
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "say something"},
            ],
            max_tokens=12,
            stream=True,
            stream_options={"include_usage": True},
        )
        roles, text, reasons, usage = [], "", [], None
        async for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                roles.append(choice.delta.role)
                text += choice.delta.content or ""
                reasons.append(choice.finish_reason)
        assert roles[0] == "assistant"
        assert tokens.count_tokens(text) == 12
        assert reasons[-1] == "length" and set(reasons[:-1]) == {None}
        assert usage is not None and usage.completion_tokens == 12 and usage.prompt_tokens == 7
        assert usage.prompt_tokens_details is not None and usage.prompt_tokens_details.cached_tokens == 0

        models = await client.models.list()
        assert [m.id for m in models.data] == [model]
        plain = await client.completions.create(model=model, prompt="one two three", max_tokens=3)
        assert plain.usage is not None and plain.usage.total_tokens == 6
    finally:
        await client.close()


async def test_openai_sdk_raises_on_a_too_long_prompt(start_sim: Any) -> None:
    cluster = await start_sim()
    client = openai.AsyncOpenAI(base_url=f"{cluster.urls[0]}/v1", api_key="x", max_retries=0)
    try:
        with pytest.raises(openai.BadRequestError) as err:
            await client.completions.create(
                model=cluster.instances[0].model, prompt="x " * 40_000, max_tokens=1
            )
        assert "maximum context length" in str(err.value)
        with pytest.raises(openai.NotFoundError):
            await client.completions.create(model="unknown", prompt="x", max_tokens=1)
    finally:
        await client.close()
