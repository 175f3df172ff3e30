"""vLLM's PD wire protocol: the two request bodies of a disaggregated request (sequential style).

The prefill leg asks the engine to keep the prompt's KV for a remote decode (``kv_transfer_params`` with
``do_remote_decode``); its answer's ``kv_transfer_params`` (the NIXL connector fills in the engine id, block
ids and side-channel host and port) go to the decode leg unchanged. :class:`~infctl.engines.vllm.VLLMAdapter`
delegates to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infctl.engines.base import Body, PDEndpoint
from infctl.errors import EngineError


def prefill_body(body: Mapping[str, Any]) -> Body:
    """The client's body made a one-token, non-streaming prefill that keeps its KV for a remote decode."""
    out = dict(body)
    out["max_tokens"] = 1
    if "max_completion_tokens" in out:
        out["max_completion_tokens"] = 1
    out["stream"] = False
    out.pop("stream_options", None)
    out.pop("min_tokens", None)  # a min_tokens above 1 would make vLLM reject max_tokens 1
    out["kv_transfer_params"] = {
        "do_remote_decode": True,
        "do_remote_prefill": False,
        "remote_engine_id": None,
        "remote_block_ids": None,
        "remote_host": None,
        "remote_port": None,
    }
    return out


def decode_body(
    body: Mapping[str, Any], prefill_response: Mapping[str, Any] | None, prefill: PDEndpoint
) -> Body:
    """The client's body plus the prefill response's ``kv_transfer_params``, passed on unchanged."""
    params = prefill_response.get("kv_transfer_params") if prefill_response is not None else None
    if not isinstance(params, dict):
        raise EngineError(
            f"prefill engine {prefill.host}:{prefill.port} answered without kv_transfer_params",
            hint="start the prefill engine with --kv-transfer-config and kv_role kv_producer or kv_both",
        )
    out = dict(body)
    out["kv_transfer_params"] = params
    return out
