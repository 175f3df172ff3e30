"""What the engines' launch modules (:mod:`~infctl.engines.vllm_launch`, :mod:`~infctl.engines.sglang_launch`)
build their command lines from, and read them back with: value formatting, the profile's ``pd`` and
``kv_events`` sections, the LeaderWorkerSet addresses a multi-node replica meets at, and a flag's value as
the engine's argparse takes it (:func:`last_value`)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from infctl.errors import ConfigError

if TYPE_CHECKING:
    from infctl.config.model import ModelProfile, PDConfig
    from infctl.engines.base import Role

DIST_PORT = 20000
"""Rendezvous port on a multi-node replica's leader for the engine's torch.distributed or data-parallel
coordination (every engine's :meth:`~infctl.engines.adapter.EngineAdapter.multinode_args` uses it; manifests
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


def last_value(argv: Sequence[str], flags: Collection[str]) -> str | None:
    """The value the last of ``flags`` (spellings of one option) takes in ``argv``, ``--flag value`` or
    ``--flag=value``: argparse keeps the last when an option repeats, which is how a profile's
    ``extra_args`` (last on every command line) override what infctl wrote before them. None when absent."""
    found = None
    for i, word in enumerate(argv):
        flag, eq, inline = word.partition("=")
        if flag in flags:
            found = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    return found


def last_count(argv: Sequence[str], flags: Collection[str], default: int = 1) -> int:
    """:func:`last_value` as a count; ``default`` when absent or not a number (the engine refuses those)."""
    found = last_value(argv, flags)
    return int(found) if found is not None and found.isdigit() else default


def last_switch(argv: Sequence[str], on: Collection[str], off: Collection[str] = ()) -> bool:
    """Whether a boolean option is set: the last of its ``on`` and ``off`` spellings (argparse's
    ``BooleanOptionalAction`` pair ``--x``/``--no-x``) wins; False when neither is given."""
    state = False
    for word in argv:
        if word in on or word in off:
            state = word in on
    return state
