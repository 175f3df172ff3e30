from __future__ import annotations

import math

import pytest

from infctl.errors import ConfigError
from infctl.sim.profiles import PROFILES, get_profile


def test_builtin_profiles_are_registered() -> None:
    assert {"llama3-8b-h100", "deepseek-v3-h200-prefill", "deepseek-v3-h200-decode", "tiny-cpu"} <= set(
        PROFILES
    )
    assert get_profile("tiny-cpu") is PROFILES["tiny-cpu"]


def test_unknown_profile_lists_known_names() -> None:
    with pytest.raises(ConfigError) as err:
        get_profile("gpt-9")
    assert "gpt-9" in err.value.message
    for name in PROFILES:
        assert name in err.value.message


def test_llama_matches_reference_anchors() -> None:
    p = get_profile("llama3-8b-h100")
    assert (p.beta0_us, p.beta1_us, p.beta2_us) == (5753.0, 17.25, 6.00)
    assert p.kv_bytes_per_token == 128 * 1024
    assert p.block_size == 16 and 28_000 <= p.num_gpu_blocks <= 30_000
    assert p.expected_itl(1) == pytest.approx(5.759e-3)
    # ~50k tok/s of prefill at full chunks.
    assert 45_000 < 8192 / p.expected_ttft(8192) < 65_000


def test_deepseek_pair_matches_reference_anchors() -> None:
    prefill, decode = get_profile("deepseek-v3-h200-prefill"), get_profile("deepseek-v3-h200-decode")
    chunk = prefill.max_num_batched_tokens
    assert chunk / prefill.expected_ttft(chunk) == pytest.approx(70_000, rel=0.05)
    itl = decode.expected_itl(750, context=4000)
    assert itl == pytest.approx(0.050, rel=0.05)
    assert 750 / itl == pytest.approx(15_000, rel=0.05)
    assert decode.kv_bytes_per_token == pytest.approx(70_000, rel=0.05)
    assert decode.max_num_seqs >= 750
    assert decode.num_gpu_blocks * decode.block_size >= 750 * 4000  # the anchor's batch fits in KV


def test_expected_ttft_counts_chunks_and_cache() -> None:
    p = get_profile("tiny-cpu")
    n = 5000
    steps = math.ceil(n / p.max_num_batched_tokens)
    assert p.expected_ttft(n) == pytest.approx((steps * p.beta0_us + n * p.beta1_us) * 1e-6)
    # A fully cached prompt still recomputes its last token.
    assert p.expected_ttft(100, cached_tokens=100) == pytest.approx((p.beta0_us + p.beta1_us) * 1e-6)


def test_step_time_formula() -> None:
    p = get_profile("tiny-cpu")
    got = p.step_time(prefill_tokens=100, decode_seqs=3, decode_context_tokens=3000)
    want = (p.beta0_us + 100 * p.beta1_us + 3 * p.beta2_us + 3 * p.attn_us_per_ktok) * 1e-6
    assert got == pytest.approx(want)


def test_with_overrides_replaces_fields_and_keeps_original() -> None:
    base = get_profile("tiny-cpu")
    small = base.with_overrides(num_gpu_blocks=8, enable_prefix_caching=False)
    assert small.num_gpu_blocks == 8 and not small.enable_prefix_caching
    assert base.num_gpu_blocks == 512 and base.enable_prefix_caching
    assert small.beta0_us == base.beta0_us


@pytest.mark.parametrize(
    "overrides",
    [{"no_such_field": 1}, {"num_gpu_blocks": 0}, {"beta1_us": -1.0}, {"max_num_batched_tokens": 4}],
)
def test_bad_overrides_raise_config_error(overrides: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        get_profile("tiny-cpu").with_overrides(**overrides)
