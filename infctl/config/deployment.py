"""The deployment profile: a model on a cluster (or on this machine), laid out as groups, pools or replicas.

Three layouts, named by ``mode``:

- ``group``: ``groups`` copies of a PD group (``group.prefill`` + ``group.decode`` replicas), each kept under
  one switch so KV transfers stay on one leaf.
- ``pool``: one pool of prefill replicas and one of decode replicas (``pools``), placed freely.
- ``aggregated``: ``replicas`` engines that each prefill and decode.

``engine_replicas()`` lists every engine replica the layout implies; the local supervisor and the manifest
renderer both iterate over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from pydantic import field_validator, model_validator

from infctl.config._base import Count, Problem, ProfileModel, check_dns_label, raise_problems
from infctl.config.cluster import ClusterProfile
from infctl.config.model import ModelProfile
from infctl.config.settings import AutoscalerSettings, LocalSettings, RouterSettings

Role = Literal["prefill", "decode", "both"]
Mode = Literal["group", "pool", "aggregated"]
Target = Literal["kubernetes", "local"]


class GroupLayout(ProfileModel):
    """Replicas in one PD group."""

    prefill: Count
    """Prefill replicas per group."""
    decode: Count
    """Decode replicas per group."""


class PoolLayout(ProfileModel):
    """Replicas in the prefill and decode pools."""

    prefill: Count
    """Prefill replicas."""
    decode: Count
    """Decode replicas."""


@dataclass(frozen=True, slots=True)
class ReplicaSpec:
    """One engine replica implied by a deployment's layout."""

    role: Role
    """prefill, decode, or both (aggregated)."""
    index: int
    """Position within its group's role, its pool, or the aggregated set, from 0."""
    group: int | None = None
    """Group index (group mode), else None."""
    pool: str | None = None
    """Pool name, ``prefill`` or ``decode`` (pool mode), else None."""

    @property
    def workload(self) -> str:
        """The set of identical replicas this one belongs to: ``g0-prefill``, ``decode``, or ``engine``."""
        if self.group is not None:
            return f"g{self.group}-{self.role}"
        return self.pool if self.pool is not None else "engine"

    @property
    def name(self) -> str:
        """Unique within a deployment, DNS-label safe: ``g0-prefill-0``, ``decode-2``, ``engine-1``."""
        return f"{self.workload}-{self.index}"


class DeploymentProfile(ProfileModel):
    """Everything ``infctl deploy`` needs: what runs, where, in which layout, and the daemons around it."""

    name: str
    """Deployment name, a DNS-1123 label; prefixes every object and process."""
    namespace: str | None = None
    """Kubernetes namespace. Default None: the ``-n`` option, else the kubeconfig context's namespace."""
    target: Target = "kubernetes"
    """Where to run: a Kubernetes cluster, or processes on this machine. Default kubernetes."""
    mode: Mode
    """Layout: group, pool or aggregated (see the module docs)."""
    model: ModelProfile
    """The model and its engine; inline, or a path to a model profile relative to this file."""
    cluster: ClusterProfile | None = None
    """The cluster; inline, or a path relative to this file. Required for target kubernetes."""
    groups: Count = 1
    """Group mode: number of PD groups. Default 1."""
    group: GroupLayout | None = None
    """Group mode: replicas per group. Required in group mode, not allowed otherwise."""
    pools: PoolLayout | None = None
    """Pool mode: replicas per pool. Required in pool mode, not allowed otherwise."""
    replicas: Count = 1
    """Aggregated mode: number of engine replicas. Default 1."""
    router: RouterSettings = RouterSettings()
    """The router in front of the engines."""
    autoscaler: AutoscalerSettings = AutoscalerSettings()
    """The autoscaler (off by default)."""
    local: LocalSettings = LocalSettings()
    """Settings used when target is local."""

    @field_validator("name", "namespace")
    @classmethod
    def _dns_label(cls, value: str | None) -> str | None:
        return None if value is None else check_dns_label(value)

    @property
    def disaggregated(self) -> bool:
        """True when prefill and decode run on separate engines (group and pool modes)."""
        return self.mode != "aggregated"

    @property
    def nodes_per_replica(self) -> int:
        """Whole nodes one replica spans (1 when it fits in one node, or without a cluster)."""
        if self.cluster is None:
            return 1
        return math.ceil(self.model.gpus_per_replica / self.cluster.gpus_per_node)

    def replicas_by_role(self) -> dict[Role, int]:
        """Total engine replicas per role, e.g. ``{"prefill": 2, "decode": 4}``."""
        counts: dict[Role, int] = {}
        for spec in self.engine_replicas():
            counts[spec.role] = counts.get(spec.role, 0) + 1
        return counts

    def engine_replicas(self) -> list[ReplicaSpec]:
        """Every engine replica, groups in order then prefill before decode."""
        if self.mode == "group" and self.group is not None:
            per_group = _split(self.group)
            return [
                ReplicaSpec(role=role, index=i, group=g)
                for g in range(self.groups)
                for role, count in per_group
                for i in range(count)
            ]
        if self.mode == "pool" and self.pools is not None:
            return [
                ReplicaSpec(role=role, index=i, pool=role)
                for role, count in _split(self.pools)
                for i in range(count)
            ]
        return [ReplicaSpec(role="both", index=i) for i in range(self.replicas)]

    @model_validator(mode="after")
    def _check_consistency(self) -> DeploymentProfile:
        raise_problems([*self._layout_problems(), *self._target_problems(), *self._autoscaler_problems()])
        return self

    def _layout_problems(self) -> list[Problem]:
        needed = {"group": "group", "pool": "pools", "aggregated": "replicas"}[self.mode]
        problems = [
            Problem(
                (key,),
                f"only used in {owner} mode, found it with mode {self.mode!r}",
                hint=f"remove {key}, or set mode: {owner}",
            )
            for key, owner in (
                ("groups", "group"),
                ("group", "group"),
                ("pools", "pool"),
                ("replicas", "aggregated"),
            )
            if owner != self.mode and key in self.model_fields_set
        ]
        if needed in ("group", "pools") and getattr(self, needed) is None:
            example = (
                "group: {prefill: 1, decode: 2}" if needed == "group" else "pools: {prefill: 2, decode: 4}"
            )
            problems.append(
                Problem(
                    (needed,),
                    f"expected a mapping with prefill and decode counts in {self.mode} mode, found nothing",
                    hint=f"add e.g. `{example}`",
                    anchor=("mode",),
                )
            )
        if self.disaggregated and self.model.pd is None:
            problems.append(
                Problem(
                    ("model", "pd"),
                    f"expected KV transfer settings in {self.mode} mode, found nothing",
                    hint="add e.g. `pd: {kv_connector: nixl}` to the model profile",
                )
            )
        return problems

    def _target_problems(self) -> list[Problem]:
        problems = []
        if self.target == "kubernetes" and self.cluster is None:
            problems.append(
                Problem(
                    ("cluster",),
                    "expected a cluster profile for target 'kubernetes', found nothing",
                    hint="add `cluster: clusters/<name>.yaml`, or set target: local",
                    anchor=("target",),
                )
            )
        if self.target == "local" and self.local.simulate and self.model.sim is None:
            problems.append(
                Problem(
                    ("model", "sim"),
                    "expected simulator settings for the local target "
                    "(local.simulate is true), found nothing",
                    hint="add `sim: {profile: llama3-8b-h100}` to the model, or set local.simulate: false",
                )
            )
        pool = self.model.kv_offload.pool if self.model.kv_offload is not None else None
        if (
            self.target == "local"
            and not self.local.simulate
            and pool is not None
            and pool.servers is not None
        ):
            problems.append(
                Problem(
                    ("model", "kv_offload", "pool", "servers"),
                    "the local target runs engines, not KV pool servers; found servers to render",
                    hint="start the pool yourself and give `pool: {address: HOST:PORT}`, or set "
                    "local.simulate: true",
                )
            )
        cluster = self.cluster
        gpus = self.model.gpus_per_replica
        if (
            self.target == "kubernetes"
            and cluster is not None
            and gpus > cluster.gpus_per_node
            and gpus % cluster.gpus_per_node
        ):
            problems.append(
                Problem(
                    ("model", "data_parallel_size"),
                    f"a replica needs {gpus} GPUs (tensor_parallel_size x data_parallel_size), which "
                    f"is not a whole number of {cluster.name}'s {cluster.gpus_per_node}-GPU nodes",
                )
            )
        return problems

    def _autoscaler_problems(self) -> list[Problem]:
        scaler = self.autoscaler
        roles = ("both",) if self.mode == "aggregated" else ("prefill", "decode")
        problems = [
            Problem(
                ("autoscaler", role),
                f"no {role} replicas in {self.mode} mode; expected bounds for {' or '.join(roles)}",
            )
            for role in ("prefill", "decode", "both")
            if role not in roles and getattr(scaler, role) is not None
        ]
        if scaler.enabled and not problems and all(getattr(scaler, role) is None for role in roles):
            problems.append(
                Problem(
                    ("autoscaler",),
                    f"enabled, but found no bounds for {' or '.join(roles)}",
                    hint=f"add e.g. `{roles[-1]}: {{min: 1, max: 4}}` under autoscaler",
                )
            )
        return problems


def _split(layout: GroupLayout | PoolLayout) -> tuple[tuple[Role, int], tuple[Role, int]]:
    return (("prefill", layout.prefill), ("decode", layout.decode))
