"""The command line of one local engine: the simulator standing in for it (:func:`sim_command`), or the real
engine (:func:`real_command`: the adapter's command or the profile's ``local.engine_command``). Pure;
:mod:`infctl.local.plan` builds each engine's process from them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from infctl.config import ModelProfile, Role
from infctl.engines import get_adapter
from infctl.engines.cmdline import TRUST_REQUEST_CHAT_TEMPLATE, run_by, trusts_request_chat_template
from infctl.local.engine_ports import host_port_args, placeholders
from infctl.local.spec import LOCALHOST


def sim_command(
    model: ModelProfile,
    role: Role,
    port: int,
    kv_port: int | None,
    python: str,
    host_ports: Mapping[str, int] | None = None,
) -> list[str]:
    """``python -m infctl sim ...`` standing in for the model's engine (``host_ports``: those it reports)."""
    sim = model.sim
    assert sim is not None, "the profile validator requires model.sim when local.simulate is true"
    # The profile counts simulated seconds per wall second (10 = ten times faster); the simulator's flag
    # counts wall seconds per simulated second (0.1 = ten times faster).
    argv = [
        python,
        "-m",
        "infctl",
        "sim",
        "--personality",
        model.engine,
        "--profile",
        sim.profile,
        "--model",
        model.served_model_name,
        "--host",
        LOCALHOST,
        "--port",
        str(port),
        "--role",
        role,
        "--time-scale",
        f"{1 / sim.speedup:g}",
    ]
    if kv_port is not None:
        argv += ["--kv-events-port", str(kv_port)]  # rank r publishes on kv_port + r
    if model.data_parallel_size > 1:
        argv += ["--data-parallel-size", str(model.data_parallel_size)]
    if host_ports and "bootstrap" in host_ports:
        argv += ["--bootstrap-port", str(host_ports["bootstrap"])]
    for flag, value in (
        ("--num-gpu-blocks", sim.num_gpu_blocks),
        ("--block-size", sim.block_size),
        ("--max-num-seqs", sim.max_num_seqs),
        ("--max-model-len", model.max_model_len),
    ):
        if value is not None:
            argv += [flag, str(value)]
    if not model.enable_prefix_caching:
        argv.append("--no-prefix-caching")
    if trusts_request_chat_template(model):
        # In a profile's extra_args, passed on to the simulator standing in for the engine (same name):
        # it refuses request templates as vLLM does without it.
        argv.append(TRUST_REQUEST_CHAT_TEMPLATE)
    if sim.tokenizer != "words":
        argv += ["--tokenizer", sim.tokenizer]
    return argv


def _fill(word: str, values: Mapping[str, object]) -> str:
    """Replace ``{port}``-style placeholders only, so JSON arguments (``{"a": 1}``) pass intact."""
    for key, value in values.items():
        word = word.replace("{" + key + "}", str(value))
    return word


def real_command(
    model: ModelProfile,
    custom: Sequence[str] | None,
    role: Role,
    port: int,
    python: str,
    host_ports: Mapping[str, int] | None = None,
) -> list[str]:
    """``custom`` (``local.engine_command``) with ``{port}``, ``{role}``, ``{model}`` (the served name),
    ``{host}``, ``{kv_events_port}`` and each host port (``{dp_rpc_port}`` for vLLM's
    ``--data-parallel-rpc-port``, ``{dist_init_port}``, ``{bootstrap_port}``) filled in; else the engine
    adapter's command, run by this machine's ``python``, followed by the host ports' flags."""
    host_ports = host_ports or {}
    if custom is not None:
        values: dict[str, object] = {
            "port": port,
            "role": role,
            "model": model.served_model_name,
            "host": LOCALHOST,
            **placeholders(model, host_ports, role),
        }
        if model.kv_events is not None:
            values["kv_events_port"] = model.kv_events.port  # this engine's own (engine_spec moved it)
        return [_fill(word, values) for word in custom]
    argv = get_adapter(model.engine).launch_command(model, role=role, port=port, host=LOCALHOST)
    argv += host_port_args(model, host_ports, LOCALHOST)
    # Adapters write the container's command; here the engine must be the one `python` imports.
    return run_by(argv, python)
