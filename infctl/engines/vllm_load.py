"""What a vLLM engine says of its load and of its KV cache besides its gauges: ``/load`` (requests in flight
at its API server) and ``vllm:cache_config_info`` (one sample per data-parallel engine core, every
cache-config field a label). Pure: a parsed body or samples in, records out;
:class:`~infctl.engines.vllm.VLLMAdapter` reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from infctl.errors import EngineError
from infctl.telemetry.prometheus import Sample
from infctl.telemetry.signals import LoadReport


def parse_load(body: object) -> LoadReport:
    """``/load`` answers ``{"server_load": <requests in flight at the API server>}``."""
    load = body.get("server_load") if isinstance(body, dict) else None
    if isinstance(load, bool) or not isinstance(load, int | float):
        raise EngineError(
            f"vLLM /load answered {str(body)[:120]!r}, expected {{'server_load': <number>}}",
            hint="is this a vLLM server started with --enable-server-load-tracking?",
        )
    return LoadReport(in_flight=float(load))


def cache_config(samples: Iterable[Sample], engine_label: str) -> tuple[int | None, int | None, bool | None]:
    """(capacity in tokens, block size, prefix caching) from ``vllm:cache_config_info``'s samples, each engine
    core's told apart by ``engine_label``."""
    blocks_by_engine: dict[str, int] = {}
    block_size: int | None = None
    prefix_flags: set[bool] = set()
    for s in samples:
        size = _int_label(s.labels, "block_size")
        block_size = block_size or size
        blocks = _int_label(s.labels, "num_gpu_blocks")
        if blocks is not None:
            # One sample per data-parallel engine: each has its own KV pool, so they add up.
            blocks_by_engine[s.labels.get(engine_label, str(len(blocks_by_engine)))] = blocks
        flag = s.labels.get("enable_prefix_caching")
        if flag is not None:
            prefix_flags.add(flag.lower() == "true")
    capacity = sum(blocks_by_engine.values()) * block_size if blocks_by_engine and block_size else None
    prefix_caching = prefix_flags.pop() if len(prefix_flags) == 1 else (True if prefix_flags else None)
    return capacity, block_size, prefix_caching


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    raw = labels.get(key)
    try:
        return int(float(raw)) if raw is not None else None
    except ValueError:  # "None" before the engine profiled its memory
        return None
