"""Between the arms of a comparison the bench empties each engine's prefix cache the way its adapter says
(``EngineAdapter.cache_reset``): vLLM's dev-mode ``/reset_prefix_cache``, SGLang's ``/flush_cache``, any
other engine's own; a busy engine is asked again, and one without the endpoint fails with the fix."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from infctl.bench.cache_reset import reset_prefix_caches
from infctl.engines import CacheReset, EngineAdapter, get_adapter
from infctl.engines.vllm import VLLMAdapter
from infctl.errors import EngineError

VLLM, SGLANG = get_adapter("vllm"), get_adapter("sglang")


def _client(answer: Callable[[httpx.Request, int], httpx.Response], seen: list[str]) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url}")
        return answer(request, sum(s.endswith(str(request.url)) for s in seen))

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def test_vllm_without_dev_mode_fails_naming_every_engine_and_the_fix() -> None:
    seen: list[str] = []
    targets = {"http://a:8000": VLLM, "http://b:8000": VLLM}
    async with _client(lambda r, n: httpx.Response(404, json={"detail": "Not Found"}), seen) as client:
        with pytest.raises(EngineError) as err:
            await reset_prefix_caches(client, targets)
    assert "http://a:8000, http://b:8000: POST /reset_prefix_cache answered 404" in err.value.message
    assert err.value.hint is not None and "VLLM_SERVER_DEV_MODE=1" in err.value.hint
    assert sorted(seen) == ["POST http://a:8000/reset_prefix_cache", "POST http://b:8000/reset_prefix_cache"]


async def test_vllm_busy_is_asked_again_until_it_resets() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request, n: int) -> httpx.Response:
        return httpx.Response(200, json={"success": n >= 3})  # vLLM: 200 either way

    async with _client(answer, seen) as client:
        await reset_prefix_caches(client, {"http://a:8000": VLLM}, retry_s=0.001)
    assert seen == ["POST http://a:8000/reset_prefix_cache"] * 3


async def test_sglang_flush_busy_past_the_settle_time_fails() -> None:
    seen: list[str] = []
    refuse = httpx.Response(400, text="Cache flushed.\n... (When there are running or waiting requests ...)")
    async with _client(lambda r, n: refuse, seen) as client:
        with pytest.raises(EngineError, match="requests still hold its blocks"):
            await reset_prefix_caches(client, {"http://s:30000": SGLANG}, settle_s=0.05, retry_s=0.01)
    assert len(seen) >= 2 and set(seen) == {"POST http://s:30000/flush_cache"}


async def test_another_engine_resets_through_its_own_path_and_method() -> None:
    class Toy(VLLMAdapter):
        cache_reset = CacheReset(path="/cache", method="DELETE")

    toy: EngineAdapter = Toy()
    seen: list[str] = []
    async with _client(lambda r, n: httpx.Response(204 if n == 1 else 200), seen) as client:
        with pytest.raises(EngineError, match="refused the prefix-cache reset: 204"):
            await reset_prefix_caches(client, {"http://t": toy})
        await reset_prefix_caches(client, {"http://t": toy})
    assert seen == ["DELETE http://t/cache"] * 2


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (200, b'{"success": true}', "reset"),
        (200, b'{"success": false}', "busy"),
        (200, b"", "refused"),
        (404, b'{"detail": "Not Found"}', "absent"),
        (500, b"", "refused"),
    ],
)
def test_vllm_answers_read_as_vllm_writes_them(status: int, body: bytes, outcome: str) -> None:
    assert VLLM.cache_reset.outcome(status, body) == outcome
