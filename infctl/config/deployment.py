"""The deployment profile: a model on a cluster (or on this machine), laid out as groups, pools or replicas.

Three layouts, named by ``mode``:

- ``group``: ``groups`` copies of a PD group (``group.prefill`` + ``group.decode`` replicas), each kept under
  one switch so KV transfers stay on one leaf.
- ``pool``: one pool of prefill replicas and one of decode replicas (``pools``), placed freely.
- ``aggregated``: ``replicas`` engines that each prefill and decode.

Any mode may instead split its engines into ``length_pools`` by prompt length
(:mod:`infctl.config.length_pools`): each pool holds its own replicas, groups or prefill/decode pools,
labelled with its name.

``engine_replicas()`` lists every engine replica the layout implies; the local supervisor and the manifest
renderer both iterate over it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from infctl.config._base import Count, Problem, ProfileModel, check_dns_label, raise_problems
from infctl.config.cluster import ClusterProfile
from infctl.config.drain import DrainSettings
from infctl.config.length_pools import GroupShape, LengthPool, pool_problems, router_buckets
from infctl.config.model import ModelProfile
from infctl.config.scale_to_zero import zero_problems
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
    """Pool label: the length pool's name, else ``prefill`` or ``decode`` (pool mode), else None."""
    length_pool: str | None = None
    """The length pool this replica serves (``length_pools``), else None."""

    @property
    def group_name(self) -> str | None:
        """The PD group's label value: ``g0``, or ``short-g0`` in a length pool; None outside group mode."""
        if self.group is None:
            return None
        return f"g{self.group}" if self.length_pool is None else f"{self.length_pool}-g{self.group}"

    @property
    def workload(self) -> str:
        """The set of identical replicas this one belongs to: ``g0-prefill``, ``decode``, ``engine``, or in
        length pools ``short-g0-prefill``, ``short-decode``, ``short``."""
        if self.group is not None:
            return f"{self.group_name}-{self.role}"
        if self.length_pool is not None:
            return self.length_pool if self.role == "both" else f"{self.length_pool}-{self.role}"
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
    length_pools: list[LengthPool] | None = Field(default=None, min_length=1)
    """Engines split by prompt length, short to long, each pool with its own replicas (instead of
    ``replicas``, ``groups`` or ``pools``); the router sends each prompt to its pool. Default None."""
    router: RouterSettings = RouterSettings()
    """The router in front of the engines."""
    autoscaler: AutoscalerSettings = AutoscalerSettings()
    """The autoscaler (off by default)."""
    local: LocalSettings = LocalSettings()
    """Settings used when target is local."""
    drain: DrainSettings = DrainSettings()
    """How engine pods stop without cutting requests (preStop, grace period, scale-in drain)."""

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

    def router_policy(self) -> str | dict[str, Any]:
        """The router's ``policy``: the preset name, or a mapping with its settings and, with length pools,
        one bucket per pool (the same for a rendered and a local router)."""
        router = self.router
        if not router.settings and self.length_pools is None:
            return router.policy
        policy: dict[str, Any] = {"preset": router.policy}
        if router.settings:
            policy["settings"] = router.settings
        if self.length_pools is not None:
            policy["buckets"] = router_buckets(self.length_pools)
        return policy

    def group_shape(self, pool: LengthPool) -> GroupShape | GroupLayout:
        """Replicas per group in ``pool`` (group mode): its own ``group``, else the deployment's."""
        shape = pool.group or self.group
        assert shape is not None, "the validator requires a group shape in group mode"
        return shape

    def engine_replicas(self) -> list[ReplicaSpec]:
        """Every engine replica, length pools in order, groups in order then prefill before decode."""
        if self.length_pools is not None:
            return [r for p in self.length_pools for r in self._pool_replicas(p)]
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

    def _pool_replicas(self, p: LengthPool) -> list[ReplicaSpec]:
        name = p.name
        if self.mode == "group":
            per_group = _split(self.group_shape(p))
            return [
                ReplicaSpec(role=role, index=i, group=g, pool=name, length_pool=name)
                for g in range(p.groups or 0)
                for role, count in per_group
                for i in range(count)
            ]
        if self.mode == "pool":
            counts: tuple[tuple[Role, int], ...] = (("prefill", p.prefill or 0), ("decode", p.decode or 0))
            return [
                ReplicaSpec(role=role, index=i, pool=name, length_pool=name)
                for role, count in counts
                for i in range(count)
            ]
        return [
            ReplicaSpec(role="both", index=i, pool=name, length_pool=name) for i in range(p.replicas or 0)
        ]

    @model_validator(mode="after")
    def _check_consistency(self) -> DeploymentProfile:
        raise_problems(
            [
                *self._layout_problems(),
                *self._target_problems(),
                *self._autoscaler_problems(),
                *zero_problems(self),
            ]
        )
        return self

    def _layout_problems(self) -> list[Problem]:
        if self.length_pools is not None:
            return self._length_pool_problems()
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

    def _length_pool_problems(self) -> list[Problem]:
        assert self.length_pools is not None
        problems = [
            Problem(
                (key,),
                "length_pools give each pool its own replicas; found this key beside them",
                hint=f"move {key} into each pool of length_pools",
            )
            for key in ("groups", "pools", "replicas")
            if key in self.model_fields_set
        ]
        if self.mode != "group" and "group" in self.model_fields_set:
            problems.append(Problem(("group",), f"only used in group mode, found it with mode {self.mode!r}"))
        problems += pool_problems(self.length_pools, self.mode, self.group is not None)
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
        if self.length_pools is not None:
            problems = [
                Problem(
                    ("autoscaler", role),
                    "with length_pools, bounds are per pool; found deployment-wide ones",
                    hint=f"move them to length_pools[].autoscaler.{role}",
                )
                for role in ("prefill", "decode", "both")
                if getattr(scaler, role) is not None
            ]
            bounded = any(p.bounds(r) is not None for p in self.length_pools for r in roles)
            if scaler.enabled and not problems and not bounded:
                problems.append(
                    Problem(
                        ("autoscaler",),
                        "enabled, but no length pool has autoscaler bounds",
                        hint=f"add e.g. `autoscaler: {{{roles[-1]}: {{min: 1, max: 4}}}}` to a pool",
                    )
                )
            return problems
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


def _split(layout: GroupLayout | PoolLayout | GroupShape) -> tuple[tuple[Role, int], tuple[Role, int]]:
    return (("prefill", layout.prefill), ("decode", layout.decode))
