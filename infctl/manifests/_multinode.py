"""Extra engine flags for a replica that spans nodes (one LeaderWorkerSet group), per engine.

These belong with the rest of each engine's command line in ``infctl.engines`` (an adapter method such as
``multinode_args(model, nodes=, gpus_per_node=, leader=)``); they live here until the adapters grow it, keyed
by the engine modules' own ``NAME`` so no engine name is spelled outside that package.

LeaderWorkerSet injects ``LWS_LEADER_ADDRESS``, ``LWS_GROUP_SIZE`` and ``LWS_WORKER_INDEX`` (0 on the leader)
into every container; Kubernetes expands ``$(VAR)`` in command and args.
"""

from __future__ import annotations

from dataclasses import dataclass

from infctl.config import ModelProfile
from infctl.engines import sglang, vllm

DIST_PORT = 20000
"""Rendezvous port on the leader for the engine's torch.distributed / DP coordination."""


@dataclass(frozen=True)
class MultiNodeArgs:
    args: tuple[str, ...]
    """Appended to the adapter's argv."""
    shell_suffix: str = ""
    """Appended unquoted when the argv needs shell arithmetic (then run through ``/bin/sh -c``)."""


def multinode_args(model: ModelProfile, *, nodes: int, gpus_per_node: int, leader: bool) -> MultiNodeArgs:
    """Flags that make ``nodes`` pods one engine replica; the leader serves HTTP, workers run headless."""
    leader_addr = "$(LWS_LEADER_ADDRESS)"
    if model.engine == sglang.NAME:
        return MultiNodeArgs(
            (
                "--nnodes",
                str(nodes),
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
                "--dist-init-addr",
                f"{leader_addr}:{DIST_PORT}",
            )
        )
    if model.engine == vllm.NAME:
        tp = model.tensor_parallel_size
        headless = () if leader else ("--headless",)
        if tp <= gpus_per_node:
            # Data-parallel ranks spread over nodes: each node runs gpus_per_node // tp of them.
            local = gpus_per_node // tp
            args = (
                "--data-parallel-size-local",
                str(local),
                "--data-parallel-address",
                leader_addr,
                "--data-parallel-rpc-port",
                str(DIST_PORT),
                *headless,
            )
            suffix = "" if leader else f"--data-parallel-start-rank $((LWS_WORKER_INDEX * {local}))"
            return MultiNodeArgs(args, suffix)
        return MultiNodeArgs(
            (
                "--nnodes",
                str(nodes),
                "--node-rank",
                "$(LWS_WORKER_INDEX)",
                "--master-addr",
                leader_addr,
                "--master-port",
                str(DIST_PORT),
                *headless,
            )
        )
    raise ValueError(f"no multi-node flags for engine {model.engine!r}")
