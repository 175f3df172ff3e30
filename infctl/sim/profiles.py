"""Hardware/model profiles for the simulated engine: step-time coefficients and cache/scheduler limits.

A step's duration is linear in its work (the model cluster simulators such as Vidur and BLIS fit)::

    step = beta0 + beta1 * prefill_tokens + beta2 * decode_seqs + attn * sum(decode context) / 1000

A request also waits ``request_overhead_us`` (plus ``request_overhead_us_per_ktok`` per 1,000 prompt tokens)
before it reaches the engine core: the API server's tokenizing and request setup, which run beside the core
and do not stall its batch (0 in the built-in profiles).

Each built-in profile documents where its numbers come from; ``expected_ttft`` and ``expected_itl``
are the anchors a fidelity benchmark compares measured latencies against.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infctl.errors import ConfigError

_POSITIVE_INTS = ("num_gpu_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len")
_NON_NEGATIVE_FLOATS = (
    "beta0_us",
    "beta1_us",
    "beta2_us",
    "attn_us_per_ktok",
    "request_overhead_us",
    "request_overhead_us_per_ktok",
)

PrefillChunks = Sequence[tuple[int, int]]
"""A step's prefill chunks, one per request: (tokens computed in this step, tokens of the request already
computed before it)."""


@dataclass(frozen=True)
class SimProfile:
    """One simulated engine: a model on a GPU (or node) with vLLM-style scheduler limits."""

    name: str
    description: str
    beta0_us: float
    """Fixed cost of every step (weights read, kernel launches, collectives), microseconds."""
    beta1_us: float
    """Cost per prefill token actually computed (prefix-cache hits are free), microseconds."""
    beta2_us: float
    """Cost per decoding sequence in the batch, microseconds."""
    attn_us_per_ktok: float
    """Attention cost per 1,000 tokens of context summed over decoding sequences, microseconds (0 allowed)."""
    num_gpu_blocks: int
    """KV cache blocks in the pool (vLLM ``num_gpu_blocks``)."""
    block_size: int
    """Tokens per KV block."""
    max_num_seqs: int
    """Most sequences running at once."""
    max_num_batched_tokens: int
    """Token budget of one step (prefill chunks plus one token per decoding sequence)."""
    max_model_len: int
    """Longest prompt plus output accepted, tokens."""
    kv_bytes_per_token: int
    """KV cache bytes per token across all layers (what a PD transfer moves)."""
    kv_transfer_gbps: float
    """PD: bandwidth of one request's KV transfer from its prefill engine, GB/s (1e9 bytes per second)."""
    model: str
    """Default served model name (also the seed of the prefix-cache block hashes)."""
    enable_prefix_caching: bool = True
    request_overhead_us: float = 0.0
    """Delay between a request's arrival and its entry into the engine core's queue, microseconds: work the
    API server does per request (tokenizing, setup) in its own process, beside the busy core. It adds to
    TTFT but never to a step."""
    request_overhead_us_per_ktok: float = 0.0
    """The part of that delay that grows with the prompt (tokenizing it, shipping its ids to the core),
    microseconds per 1,000 prompt tokens."""

    @property
    def uses_prefill_chunks(self) -> bool:
        """True when ``step_time`` depends on each prefill chunk's prefix (drivers pass ``chunks`` only
        then, to keep the hot path cheap)."""
        return False

    def __post_init__(self) -> None:
        for key in _POSITIVE_INTS:
            if getattr(self, key) < 1:
                raise ConfigError(f"profile {self.name!r}: {key} must be >= 1, got {getattr(self, key)}")
        for key in _NON_NEGATIVE_FLOATS:
            if getattr(self, key) < 0:
                raise ConfigError(f"profile {self.name!r}: {key} must be >= 0, got {getattr(self, key)}")
        if self.kv_bytes_per_token < 0 or self.kv_transfer_gbps <= 0:
            raise ConfigError(
                f"profile {self.name!r}: kv_bytes_per_token must be >= 0 and kv_transfer_gbps > 0"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM refuses this too: a full decode batch would not fit one step's budget.
            raise ConfigError(
                f"profile {self.name!r}: max_num_batched_tokens ({self.max_num_batched_tokens}) "
                f"must be >= max_num_seqs ({self.max_num_seqs})"
            )

    def with_overrides(self, **overrides: Any) -> SimProfile:
        """A copy with some fields replaced (e.g. ``num_gpu_blocks=64``); unknown names raise ConfigError."""
        check_fields(type(self), overrides, "unknown simulator profile field(s)")
        return dataclasses.replace(self, **overrides)

    def request_overhead(self, prompt_tokens: int) -> float:
        """Seconds a request of ``prompt_tokens`` spends before it reaches the engine core."""
        return (self.request_overhead_us + self.request_overhead_us_per_ktok * prompt_tokens * 1e-3) * 1e-6

    def step_time(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        chunks: PrefillChunks | None = None,
    ) -> float:
        """Seconds one step takes; ``decode_context_tokens`` sums the decoding sequences' context lengths.

        ``chunks`` splits ``prefill_tokens`` by request (see :data:`PrefillChunks`); None means one chunk
        with no prefix. The linear model ignores it; profiles with a per-chunk term use it."""
        us = (
            self.beta0_us
            + self.beta1_us * prefill_tokens
            + self.beta2_us * decode_seqs
            + self.attn_us_per_ktok * decode_context_tokens / 1000.0
        )
        return us * 1e-6

    def expected_ttft(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        """Seconds from arrival to first token on an idle engine (chunked prefill, no queueing)."""
        computed = prompt_tokens - min(cached_tokens, prompt_tokens - 1)
        steps = math.ceil(computed / self.max_num_batched_tokens)
        return (
            self.request_overhead(prompt_tokens) + (steps * self.beta0_us + computed * self.beta1_us) * 1e-6
        )

    def expected_itl(self, batch: int, context: int = 0) -> float:
        """Seconds between tokens in a decode-only step of ``batch`` sequences of ``context`` tokens each."""
        return self.step_time(0, batch, batch * context)


def check_fields(cls: type[SimProfile], names: Iterable[str], message: str) -> None:
    """ConfigError ``message: <names that are not fields of cls>``, with the known fields as the hint."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(names) - known)
    if unknown:
        hint = f"known fields: {', '.join(sorted(known))}"
        raise ConfigError(f"{message}: {', '.join(unknown)}", hint=hint)


# Llama-3.1-8B BF16 on one H100 80GB (REFERENCE section 5).
# - beta = [5753, 17.25, 6.00] us is the BLIS/Vidur-style fit; it already absorbs attention at typical
#   context, so the attention term is 0: decode ~5.8 ms + 6 us/seq, prefill ~58k tok/s at a full 8k chunk.
# - KV per token: 32 layers * 8 KV heads * 128 dims * 2 (K and V) * 2 bytes = 131,072 B (128 KiB);
#   a 16-token block is 2 MiB.
# - Blocks: 0.9 * 79.6 GiB - 15.0 GiB weights - ~0.6 GiB activations ~= 56 GiB / 2 MiB ~= 28.7k
#   (vLLM logs ~29k).
# - Limits are vLLM's defaults on an H100 (256 seqs, 8192-token chunks); 32k context so long-prompt traces
#   (Mooncake: mean input 15.3k) replay unclipped.
# - PD transfer over one 200 Gb/s RoCE NIC: 25 GB/s.
LLAMA3_8B_H100 = SimProfile(
    name="llama3-8b-h100",
    description="Llama-3.1-8B BF16 on one H100 80GB (BLIS fit beta=[5753, 17.25, 6.00] us)",
    beta0_us=5753.0,
    beta1_us=17.25,
    beta2_us=6.00,
    attn_us_per_ktok=0.0,
    num_gpu_blocks=28_700,
    block_size=16,
    max_num_seqs=256,
    max_num_batched_tokens=8192,
    max_model_len=32_768,
    kv_bytes_per_token=131_072,
    kv_transfer_gbps=25.0,
    model="meta-llama/Llama-3.1-8B-Instruct",
)

# DeepSeek-V3 (671B MoE, 37B active, FP8 weights) on one 8xH200 node, PD-disaggregated, one engine per node
# (DP-attention + EP8 ranks pooled).  Anchors (REFERENCE section 5, DeepSeek's published serving numbers):
# ~70k prompt tok/s per prefill node, ~15k output tok/s per decode node at ~50 ms ITL.
# - beta0 20 ms: with large batches every expert is touched, so a step reads all 671 GB of FP8 weights,
#   84 GB per GPU at 4.8 TB/s = 17.5 ms, plus launch and all-to-all overhead.
# - beta1 13 us/token: ~84 GFLOP per prompt token (2 * 37B linear + MLA at ~4k context) on
#   8 * 1979 TFLOPS FP8 at ~40% MFU ~= 6.3 PFLOPS.  A full 16,384-token chunk: 20 + 213 ms -> 70.3k tok/s.
# - beta2 20 us/seq: ~9.4 us of expert GEMMs per token at 50% MFU, plus dispatch/combine and sampling.
# - attn 5 us per 1k context tokens: MLA decode reads 70 KB/token; at 38 TB/s aggregate that is 1.8 us/ktok
#   ideal, ~40% efficient for paged latent attention with absorbed projections.
#   Decode anchor: 750 seqs at 4k context -> 20 + 15 + 15 = 50 ms per step -> 15k tok/s.
# - KV: MLA latent 61 layers * (512 + 64) dims * 2 bytes = 70,272 B/token (BF16).
# - Blocks of 64 tokens (FlashMLA's page size): ~33 GB free per GPU after ~84 GB of weights and activations,
#   264 GB per node / 70,272 B ~= 3.76M tokens ~= 58.7k blocks; 60k blocks = 3.84M tokens.
# - PD transfer: a request lives on one DP rank, whose GPU has one 400 Gb/s NIC -> 50 GB/s.
_DSV3_COMMON: dict[str, Any] = {
    "beta0_us": 20_000.0,
    "beta1_us": 13.0,
    "beta2_us": 20.0,
    "attn_us_per_ktok": 5.0,
    "num_gpu_blocks": 60_000,
    "block_size": 64,
    "max_model_len": 131_072,
    "kv_bytes_per_token": 70_272,
    "kv_transfer_gbps": 50.0,
    "model": "deepseek-ai/DeepSeek-V3",
}
DEEPSEEK_V3_H200_PREFILL = SimProfile(
    name="deepseek-v3-h200-prefill",
    description="DeepSeek-V3 prefill node, 8xH200 (~70k prompt tok/s at 16k-token chunks)",
    max_num_seqs=256,
    max_num_batched_tokens=16_384,
    **_DSV3_COMMON,
)
DEEPSEEK_V3_H200_DECODE = SimProfile(
    name="deepseek-v3-h200-decode",
    description="DeepSeek-V3 decode node, 8xH200 (~15k output tok/s at ~50 ms ITL, 750 seqs of 4k context)",
    # 8 DP ranks * 128 sequences: beyond ~750 the ITL climbs past the 50 ms anchor (1024 seqs -> 61 ms).
    max_num_seqs=1024,
    max_num_batched_tokens=8192,
    **_DSV3_COMMON,
)

# Kimi K2 (1.04T MoE, 32B active, FP8 weights) as one 16xH200 replica over two nodes (DP16 + EP16, as
# profiles/models/kimi-k2-vllm.yaml deploys it), aggregated (prefill and decode on the same engine). Estimates
# from the architecture, scaled from the DeepSeek-V3 profile above (same MLA cache layout, half the heads):
# - beta0 22 ms: 1.03 TB of FP8 weights / 16 GPUs = 64.5 GB per GPU at 4.8 TB/s = 13.4 ms, plus two expert
#   all-to-alls per layer (61 layers) crossing the nodes' InfiniBand.
# - beta1 7 us/token: ~70 GFLOP per prompt token (2 * 32B linear + MLA at ~4k context) on
#   16 * 1979 TFLOPS FP8 at ~40% MFU ~= 12.7 PFLOPS = 5.5 us, plus cross-node dispatch. A full 16,384-token
#   chunk: 22 + 115 ms -> ~120k prompt tok/s per replica (7.5k per GPU; DeepSeek-V3's node: 8.8k).
# - beta2 16 us/seq; attn 2.5 us per 1k context tokens: the 70 KB/token latent cache read at 76.8 TB/s
#   aggregate is 0.9 us/ktok ideal, ~40% efficient. Decode anchor: 1,500 seqs at 4k context ->
#   22 + 24 + 15 = 61 ms per step -> ~24.6k output tok/s per replica.
# - KV: 61 layers * (512 + 64) * 2 bytes = 70,272 B/token, as DeepSeek-V3. Blocks of 64 tokens: ~54 GB free
#   per GPU (127 GB at 0.9 utilisation - 64.5 GB weights - ~8 GB activations), 870 GB per replica / 70,272 B
#   ~= 12.4M tokens ~= 193k blocks; 190k blocks.
# - Limits: 16 ranks * 128 sequences; 128k context (the model file's max_model_len).
KIMI_K2_H200 = SimProfile(
    name="kimi-k2-h200",
    description="Kimi K2 on 16xH200 (2 nodes, DP16+EP16), aggregated: ~120k prompt tok/s, ~25k output tok/s",
    beta0_us=22_000.0,
    beta1_us=7.0,
    beta2_us=16.0,
    attn_us_per_ktok=2.5,
    num_gpu_blocks=190_000,
    block_size=64,
    max_num_seqs=2048,
    max_num_batched_tokens=16_384,
    max_model_len=131_072,
    kv_bytes_per_token=70_272,
    kv_transfer_gbps=50.0,
    model="moonshotai/Kimi-K2-Instruct",
)

# A tiny random Llama served by vLLM's CPU build (REFERENCE section 7: hidden 256, 2 layers, 2 KV heads of 64
# dims): KV = 2 layers * 2 heads * 64 dims * 2 (K and V) * 2 bytes = 1,024 B/token.  The pool is deliberately
# small (512 blocks = 8,192 tokens) so a handful of requests exercise preemption and eviction; the step costs
# are round numbers of CPU-scale order (ms per step), with a small attention term so the term gets exercised.
TINY_CPU = SimProfile(
    name="tiny-cpu",
    description="Tiny Llama on CPU: small 512-block pool for preemption/eviction tests and local demos",
    beta0_us=2000.0,
    beta1_us=10.0,
    beta2_us=100.0,
    attn_us_per_ktok=2.0,
    num_gpu_blocks=512,
    block_size=16,
    max_num_seqs=16,
    max_num_batched_tokens=2048,
    max_model_len=4096,
    kv_bytes_per_token=1024,
    kv_transfer_gbps=1.0,
    model="tiny-llama",
)

PROFILES: dict[str, SimProfile] = {
    p.name: p
    for p in (LLAMA3_8B_H100, DEEPSEEK_V3_H200_PREFILL, DEEPSEEK_V3_H200_DECODE, KIMI_K2_H200, TINY_CPU)
}


def get_profile(name: str) -> SimProfile:
    """The built-in profile called ``name``, or the profile file at path ``name`` (``*.yaml``/``*.json`` or
    containing ``/``, as ``infctl sim calibrate --out`` writes); else ConfigError listing the known ones."""
    from infctl.sim.calib_profile import load_profile_file, looks_like_path

    if name not in PROFILES and looks_like_path(name):
        return load_profile_file(Path(name))
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ConfigError(
            f"unknown simulator profile {name!r} (known: {known})",
            hint=f"pick one of: {known}, or a profile file (infctl sim calibrate --out FILE)",
        ) from None
