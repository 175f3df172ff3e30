"""The KV side channel a vLLM PD prefill names: reachable from its decodes, or the fix."""

from __future__ import annotations

import pytest

from infctl.doctor.engine_eval import evaluate_side_channel


def answer(host: object, port: int = 5600) -> dict[str, object]:
    return {"choices": [{"text": "x"}], "kv_transfer_params": {"remote_host": host, "remote_port": port}}


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.0.1.1", "::1", "0.0.0.0", "LOCALHOST"])
def test_a_loopback_side_channel_on_a_remote_engine_fails_with_the_variable(host: str) -> None:
    found = evaluate_side_channel(answer(host), target="http://10.0.3.7:8000")
    assert found.status == "fail" and f"{host}:5600" in found.summary
    assert found.fix is not None and "VLLM_NIXL_SIDE_CHANNEL_HOST" in found.fix


def test_the_pods_own_address_passes() -> None:
    found = evaluate_side_channel(answer("10.0.3.7", 5601), target="http://10.0.3.7:8000")
    assert found.status == "pass" and "10.0.3.7:5601" in found.summary
    ipv6 = evaluate_side_channel(answer("fd00::7"), target="http://[fd00::7]:8000")
    assert ipv6.status == "pass"


def test_an_engine_on_this_machine_may_name_loopback() -> None:
    for url in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"):
        assert evaluate_side_channel(answer("127.0.0.1"), target=url).status == "pass", url


def test_an_answer_without_a_side_channel_is_skipped() -> None:
    for body in ({"choices": []}, {"kv_transfer_params": None}, answer(None), answer(""), "text"):
        assert evaluate_side_channel(body, target="http://10.0.3.7:8000").status == "skip", body
