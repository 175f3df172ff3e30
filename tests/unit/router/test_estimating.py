"""Routing on the estimate in front of the model's tokenizer: only where no decision could differ, and
never for the precise index; the exact count after widens the band."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

import pytest
from tokenizerkit import chinese, english, tiny_tokenizer

from infctl.router import build_policy
from infctl.router.core import RouterCore
from infctl.router.estimating import CPU_SHARE, Estimating
from infctl.router.metrics import RouterMetrics
from infctl.router.policies import PDSettings
from infctl.router.requests import EstimatePlan, prompt_chars, read_request_info
from infctl.tokenization import EstimateTokenizer, Tokenizer, load_tokenizer
from infctl.tokenization.band import RatioBand

__all__ = ["tiny_tokenizer"]  # the session fixture, imported for this module's tests

BUCKETS = [{"name": "short", "max_tokens": 512, "pools": ["s"]}, {"name": "long", "pools": ["l"]}]


@pytest.fixture
def model_tokenizer(tiny_tokenizer: Path) -> Tokenizer:
    return load_tokenizer(str(tiny_tokenizer))


async def read(
    body: dict[str, Any],
    tok: Tokenizer,
    plan: EstimatePlan | None,
    *,
    own_template: bool = False,
    loop: Any = None,
) -> Any:
    return await read_request_info(
        body,
        chat="messages" in body,
        loop=loop or asyncio.get_running_loop(),
        own_template=own_template,
        estimate=plan,
        request_id="r",
        headers={},
        block_size=16,
        session_header="x-session",
        tokenizer=tok,
    )


def test_the_plan_names_every_threshold_and_steps_aside_for_the_precise_index(
    model_tokenizer: Tokenizer,
) -> None:
    est = Estimating(model_tokenizer, RouterMetrics())
    plan = est.plan(RouterCore(build_policy({"preset": "cache_aware", "buckets": BUCKETS})), PDSettings())
    assert plan is not None and plan.thresholds == (512, PDSettings().min_uncached_tokens)
    assert est.plan(RouterCore(build_policy({"preset": "cache_aware", "index": "precise"})), None) is None
    assert (
        Estimating(EstimateTokenizer(), RouterMetrics()).plan(RouterCore(build_policy("cache_aware")), None)
        is None
    )


async def test_far_from_every_threshold_the_estimate_routes(model_tokenizer: Tokenizer) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": chinese(random.Random(1), 3000)}]}
    info = await read(body, model_tokenizer, EstimatePlan(RatioBand(), (512,)))
    assert info.estimated
    assert info.prompt_tokens == len(EstimateTokenizer().chat_ids(body["messages"]))
    assert info.block_hashes  # the approximate index works on the estimate's ids
    exact = await read(body, model_tokenizer, None)
    assert not exact.estimated and exact.prompt_tokens > 512  # the same side of the threshold


async def test_near_a_threshold_the_model_counts(model_tokenizer: Tokenizer) -> None:
    # English the model counts above 512 and the estimate at or below it: only the exact count is right.
    rng = random.Random(3)
    text = english(rng, 100)
    while model_tokenizer.count(text) <= 512:
        text += " " + english(rng, 5)
    assert EstimateTokenizer().count(text) <= 512 < model_tokenizer.count(text)
    info = await read({"model": "m", "prompt": text}, model_tokenizer, EstimatePlan(RatioBand(), (512,)))
    assert not info.estimated and info.prompt_tokens == model_tokenizer.count(text)


async def test_tools_are_written_only_by_the_real_template(model_tokenizer: Tokenizer) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = {"model": "m", "messages": [{"role": "user", "content": "hi " * 3000}], "tools": tools}
    info = await read(body, model_tokenizer, EstimatePlan(RatioBand(), ()))
    assert not info.estimated


async def test_the_count_after_feeds_the_band_and_the_metrics(model_tokenizer: Tokenizer) -> None:
    metrics = RouterMetrics()
    est = Estimating(model_tokenizer, metrics)
    plan = est.plan(RouterCore(build_policy("cache_aware")), None)
    body = {"model": "m", "prompt": chinese(random.Random(2), 2000)}
    info = await read(body, model_tokenizer, plan)
    assert info.estimated
    est.count_later(asyncio.get_running_loop(), body, False, info)
    for _ in range(200):
        if not est.pending:
            break
        await asyncio.sleep(0.01)
    assert metrics.exact_counts["background"] == 1 and est.band.seen == 1
    assert 'infctl_router_exact_token_counts_total{when="background"} 1' in metrics.render([], "p")


async def test_a_chats_characters_are_read_once_as_it_arrives(model_tokenizer: Tokenizer) -> None:
    """The count after routing takes the characters read on arrival: the request's messages are not read
    again for them (here the body is gone by then, and the English prompt is still scaled as English)."""
    metrics = RouterMetrics()
    est = Estimating(model_tokenizer, metrics)
    body = {"model": "m", "messages": [{"role": "user", "content": english(random.Random(4), 300)}]}
    info = await read(body, model_tokenizer, est.plan(RouterCore(build_policy("cache_aware")), None))
    assert info.estimated and info.prompt_chars == prompt_chars(body, chat=True)
    est.band.observe(800, 100, 200)  # English seen at twice the estimate
    est.pending = 2  # no room for an exact count: the estimate is scaled by its class's ratio
    est.count_later(asyncio.get_running_loop(), {"model": "m"}, True, info)
    assert metrics.exact_counts["skipped"] == 1 and metrics.prompt_tokens == 2 * info.prompt_tokens


class Slow(Tokenizer):
    """An exact tokenizer that spends ``cpu_s`` of CPU on every prompt."""

    exact = True

    def __init__(self, cpu_s: float, repeat: int = 1) -> None:
        self.cpu_s = cpu_s
        self.repeat = repeat
        """Ids per estimated one: its count is ``repeat`` times the estimate's."""

    def encode(self, text: str, *, special: bool = True) -> list[int]:
        began = time.thread_time()
        while time.thread_time() - began < self.cpu_s:
            pass
        return EstimateTokenizer().encode(text) * self.repeat

    def chat_ids(self, messages: Any, **options: Any) -> list[int]:
        return self.encode(str(messages))


async def test_the_counts_after_keep_to_their_cpu_share() -> None:
    metrics = RouterMetrics()
    now = [0.0]
    est = Estimating(Slow(2 * CPU_SHARE, repeat=2), metrics, clock=lambda: now[0])  # refills when told
    loop = asyncio.get_running_loop()
    body = {"model": "m", "prompt": "x" * 4000}
    info = await read(body, est.tokenizer, est.plan(RouterCore(build_policy("cache_aware")), None))
    assert info.estimated
    est.count_later(loop, body, False, info)
    while est.pending:
        await asyncio.sleep(0.01)
    counted = metrics.prompt_tokens
    est.count_later(loop, body, False, info)  # the first spent twice the share: nothing left for this one
    assert (metrics.exact_counts["background"], metrics.exact_counts["skipped"]) == (1, 1)
    # Left uncounted, it adds its estimate scaled by what the counted one showed (twice the estimate).
    assert counted == 2 * info.prompt_tokens and metrics.prompt_tokens == 2 * counted
    now[0] = 1.5  # 0.15 s of CPU earned back: the debt of 0.1 s is paid and there is credit again
    est.count_later(loop, body, False, info)
    assert est.pending == 1
    while est.pending:
        await asyncio.sleep(0.01)
    assert metrics.exact_counts["background"] == 2


async def test_a_requests_own_template_is_written_only_by_itself(model_tokenizer: Tokenizer) -> None:
    own = "{% for m in messages %}{% for i in range(40) %}{{ m['content'] }}{% endfor %}{% endfor %}"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi " * 3000}], "chat_template": own}
    info = await read(body, model_tokenizer, EstimatePlan(RatioBand(), ()), own_template=True)
    assert not info.estimated and info.prompt_tokens > 40 * 3000


class NoThreads:
    """An event loop that fails the test if anything is sent to a worker thread."""

    def run_in_executor(self, *args: Any) -> Any:
        raise AssertionError("rendered in a worker thread")


async def test_a_request_template_takes_a_thread_only_when_trusted(model_tokenizer: Tokenizer) -> None:
    """A short chat bringing its own template renders in a worker thread when the router trusts request
    templates (code of unknown cost); untrusted, the template is ignored and the model's renders on the
    event loop, as for any short chat."""
    own = "{% for m in messages %}{% for i in range(40) %}{{ m['content'] }}{% endfor %}{% endfor %}"
    messages = [{"role": "user", "content": "hi there"}]
    plain = await read({"model": "m", "messages": messages}, model_tokenizer, None, loop=NoThreads())
    for body in (
        {"model": "m", "messages": messages, "chat_template": own},
        {"model": "m", "messages": messages, "chat_template_kwargs": {"chat_template": own}},
    ):
        info = await read(body, model_tokenizer, None, loop=NoThreads())
        assert info.prompt_tokens == plain.prompt_tokens
        with pytest.raises(AssertionError, match="worker thread"):
            await read(body, model_tokenizer, None, own_template=True, loop=NoThreads())
