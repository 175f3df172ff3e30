"""What a vLLM engine says of its load and of its KV cache besides its gauges: ``/load`` (requests in flight
at its API server) and ``vllm:cache_config_info`` (one sample per data-parallel engine core, every
cache-config field a label, ``num_gpu_blocks`` the pool of all of them). Pure: a parsed body or samples in,
records out; :class:`~infctl.engines.vllm.VLLMAdapter` reads them.
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


def cache_config(samples: Iterable[Sample]) -> tuple[int | None, int | None, bool | None]:
    """(capacity in tokens, block size, prefix caching) from ``vllm:cache_config_info``'s samples: those of
    one API server (one ``/metrics``, or one pod's series), which serves one model.

    The capacity is the KV pool of every engine core the samples describe. vLLM's front end sums
    ``num_gpu_blocks`` over the engine cores it manages (``v1/engine/core_client.py:851-855``
    ``_apply_ready_response``) and writes that one config on every engine core's sample
    (``v1/metrics/loggers.py:1133-1136`` ``log_metrics_info``), so the sum is read once, not added up.
    Earlier V1 releases summed the same way at start-up (``v1/engine/utils.py`` ``wait_for_engine_startup``:
    "Sum values from all engines in DP case"); V0 wrote one sample, with no ``engine`` label. The largest
    value rather than the first: samples that disagree are no vLLM's (the simulator before 0.32's shape
    wrote each rank's own pool), and one rank's pool errs low where a sum would count it once per rank."""
    pool_blocks: int | None = None
    block_size: int | None = None
    prefix_flags: set[bool] = set()
    for s in samples:
        size = _int_label(s.labels, "block_size")
        block_size = block_size or size
        blocks = _int_label(s.labels, "num_gpu_blocks")
        if blocks is not None:
            pool_blocks = max(pool_blocks or 0, blocks)
        flag = s.labels.get("enable_prefix_caching")
        if flag is not None:
            prefix_flags.add(flag.lower() == "true")
    capacity = pool_blocks * block_size if pool_blocks and block_size else None
    prefix_caching = prefix_flags.pop() if len(prefix_flags) == 1 else (True if prefix_flags else None)
    return capacity, block_size, prefix_caching


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    raw = labels.get(key)
    try:
        return int(float(raw)) if raw is not None else None
    except ValueError:  # "None" before the engine profiled its memory
        return None
