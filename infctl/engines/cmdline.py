"""What the engines' launch modules (:mod:`~infctl.engines.vllm_launch`, :mod:`~infctl.engines.sglang_launch`)
build their command lines from: value formatting, the profile's ``pd`` and ``kv_events`` sections, and the
LeaderWorkerSet addresses a multi-node replica meets at."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infctl.errors import ConfigError

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile, PDConfig
    from infctl.engines.base import Role

DIST_PORT = 20000
"""Rendezvous port on a multi-node replica's leader for the engine's torch.distributed or data-parallel
coordination (every engine's :meth:`~infctl.engines.base.EngineAdapter.multinode_args` uses it; manifests
open it)."""
LWS_LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"
LWS_WORKER_INDEX = "$(LWS_WORKER_INDEX)"
"""LeaderWorkerSet injects ``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE`` and ``LWS_WORKER_INDEX`` (0 on the
leader) into every container; Kubernetes expands ``$(VAR)`` in command and args."""


TRUST_REQUEST_CHAT_TEMPLATE = "--trust-request-chat-template"
"""vLLM's flag (0.32, ``vllm serve --help``) that lets chat requests bring their own template; without it
vLLM refuses them (400, ``OnlineRenderer.validate_chat_template``)."""


def trusts_request_chat_template(model: ModelProfile) -> bool:
    """Whether the model's engines render a chat request's own template: its ``extra_args`` pass
    :data:`TRUST_REQUEST_CHAT_TEMPLATE` (the simulator standing in for vLLM takes it too; the router's
    ``trust_request_chat_template`` follows it)."""
    return TRUST_REQUEST_CHAT_TEMPLATE in model.extra_args


def number_arg(x: float) -> str:
    """A number as a command-line value: ``8`` rather than ``8.0``, ``0.5`` as is."""
    return str(int(x)) if float(x).is_integer() else str(x)


def json_arg(obj: Mapping[str, Any]) -> str:
    """A JSON command-line value, compact (``{"a":1}``) as the engines' docs write them."""
    return json.dumps(obj, separators=(",", ":"))


def pd_section(model: ModelProfile, role: Role, example: str) -> PDConfig:
    """The profile's ``pd`` section, which a prefill or decode engine cannot start without.

    ``example`` is the section to suggest (each engine reads other fields of it)."""
    if model.pd is None:
        raise ConfigError(
            f"model {model.served_model_name!r}: a {role} engine needs the profile's pd section",
            hint=f"add `pd: {example}` to the model profile",
        )
    return model.pd


def kv_events_publisher(model: ModelProfile) -> dict[str, str] | None:
    """The ZMQ publisher both engines' ``--kv-events-config`` share (publisher, endpoint, topic); None when
    the profile publishes no KV events. ``$MODEL`` is known here; ``$POD_IP`` is left for the runner
    (Kubernetes renders it as ``$(POD_IP)``)."""
    events = model.kv_events
    if events is None or not events.enabled:
        return None
    topic = events.topic.replace("$MODEL", model.served_model_name)
    return {"publisher": "zmq", "endpoint": f"tcp://*:{events.port}", "topic": topic}
