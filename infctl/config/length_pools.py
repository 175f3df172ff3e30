"""Length pools: engines split by prompt length, so short requests never queue behind long prefills.

A deployment's ``length_pools`` lists pools in order of prompt length. Each pool has a name (its
``infctl.io/pool`` label and the router's bucket of the same name), ``max_prompt_tokens`` (the largest prompt
it takes; the last pool takes every longer prompt and names none), its replicas in the deployment's mode
(``replicas`` aggregated; ``prefill``/``decode`` in pool mode; ``groups`` of ``group`` in group mode),
optional autoscaler bounds per role, and optional ``spill_to``: the pools whose engines may take its
requests while its own are saturated (the router's default: the pools of longer prompts)::

    length_pools:
      - {name: short, max_prompt_tokens: 2048, replicas: 6, autoscaler: {both: {min: 4, max: 12}}}
      - {name: long, replicas: 2, spill_to: []}

:func:`router_buckets` turns them into the router's ``policy.buckets`` (``infctl.router.policies.buckets``).
"""

from __future__ import annotations

from typing import Annotated, Any, Protocol

from pydantic import AfterValidator, Field

from infctl.config._base import Count, Problem, ProfileModel, check_dns_label
from infctl.config.scale_to_zero import ScaleToZero
from infctl.config.settings import ScaleBounds

PoolName = Annotated[str, AfterValidator(check_dns_label), Field(max_length=20)]
"""Short, since it prefixes workload names (``<release>-<pool>-g0-prefill``)."""


class GroupShape(ProfileModel):
    """Replicas in one PD group of a length pool."""

    prefill: Count
    """Prefill replicas per group."""
    decode: Count
    """Decode replicas per group."""


class PoolScaling(ProfileModel):
    """Autoscaler bounds for one length pool, per role (as ``autoscaler.both/prefill/decode``)."""

    both: ScaleBounds | None = None
    """Aggregated mode: this pool's engine replicas."""
    prefill: ScaleBounds | None = None
    """Pool and group modes: this pool's prefill replicas (over all its groups in group mode)."""
    decode: ScaleBounds | None = None
    """Pool and group modes: this pool's decode replicas (over all its groups in group mode)."""
    scale_to_zero: ScaleToZero | None = None
    """Scale-to-zero for this pool's bounds with ``min: 0`` (aggregated mode;
    ``infctl.config.scale_to_zero``). None: off."""


class LengthPool(ProfileModel):
    """One pool of engines serving prompts up to ``max_prompt_tokens``."""

    name: PoolName
    """Pool name: the engines' ``infctl.io/pool`` label and the router's bucket name."""
    max_prompt_tokens: Annotated[int, Field(ge=1)] | None = None
    """Largest prompt (tokens, inclusive) this pool takes; absent on the last pool (every longer prompt)."""
    replicas: Count | None = None
    """Aggregated mode: engine replicas."""
    prefill: Count | None = None
    """Pool mode: prefill replicas."""
    decode: Count | None = None
    """Pool mode: decode replicas."""
    groups: Count | None = None
    """Group mode: PD groups in this pool."""
    group: GroupShape | None = None
    """Group mode: replicas per group. Default: the deployment's ``group``."""
    spill_to: list[PoolName] | None = None
    """Pools that may take this pool's requests while its engines are saturated; ``[]`` never spills.
    Default: the pools after this one (longer prompts)."""
    autoscaler: PoolScaling | None = None
    """Bounds the autoscaler keeps this pool's replicas in (needs ``autoscaler.enabled``). None: fixed."""

    def bounds(self, role: str) -> ScaleBounds | None:
        """This pool's bounds for ``role`` (both, prefill, decode), or None."""
        return None if self.autoscaler is None else getattr(self.autoscaler, role)


MODE_KEYS = {"aggregated": ("replicas",), "pool": ("prefill", "decode"), "group": ("groups",)}
"""Replica keys each mode requires of a length pool."""


def pool_problems(pools: list[LengthPool], mode: str, has_group: bool) -> list[Problem]:
    """Every mistake in ``length_pools`` for ``mode`` (``has_group``: the deployment sets ``group``)."""
    problems: list[Problem] = []
    names = [p.name for p in pools]
    roles = ("both",) if mode == "aggregated" else ("prefill", "decode")
    for i, p in enumerate(pools):
        here: tuple[str | int, ...] = ("length_pools", i)
        problems += [
            Problem((*here, key), f"expected a count in {mode} mode, found nothing", anchor=(*here, "name"))
            for key in MODE_KEYS[mode]
            if getattr(p, key) is None
        ]
        problems += [
            Problem((*here, key), f"only used in {owner} mode, found it with mode {mode!r}")
            for owner, keys in (*MODE_KEYS.items(), ("group", ("group",)))
            if owner != mode
            for key in keys
            if key in p.model_fields_set and key not in MODE_KEYS[mode]
        ]
        if mode == "group" and p.group is None and not has_group:
            problems.append(
                Problem(
                    (*here, "group"),
                    "expected replicas per group, found nothing here nor in the deployment's group",
                    hint="add e.g. `group: {prefill: 1, decode: 2}` to the pool or the deployment",
                    anchor=(*here, "name"),
                )
            )
        last = i == len(pools) - 1
        if last and p.max_prompt_tokens is not None:
            problems.append(
                Problem(
                    (*here, "max_prompt_tokens"),
                    "the last pool takes every longer prompt; found a limit on it",
                    hint="remove max_prompt_tokens from the last pool",
                )
            )
        if not last and p.max_prompt_tokens is None:
            problems.append(
                Problem(
                    (*here, "max_prompt_tokens"),
                    "expected the largest prompt this pool takes (tokens); only the last pool has none",
                    anchor=(*here, "name"),
                )
            )
        prev = pools[i - 1].max_prompt_tokens if i else None
        if prev is not None and p.max_prompt_tokens is not None and p.max_prompt_tokens <= prev:
            problems.append(
                Problem(
                    (*here, "max_prompt_tokens"),
                    f"expected more than the previous pool's {prev} (pools go from short to long prompts), "
                    f"found {p.max_prompt_tokens}",
                )
            )
        unknown = [n for n in p.spill_to or () if n not in names or n == p.name]
        if unknown:
            problems.append(Problem((*here, "spill_to"), f"expected other pools of {names}, found {unknown}"))
        problems += [
            Problem(
                (*here, "autoscaler", role),
                f"no {role} replicas in {mode} mode; expected bounds for {' or '.join(roles)}",
            )
            for role in ("both", "prefill", "decode")
            if role not in roles and p.bounds(role) is not None
        ]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        problems.append(Problem(("length_pools",), f"pool names must be unique, found {dupes} twice"))
    return problems


class _Shape(Protocol):
    @property
    def prefill(self) -> int: ...
    @property
    def decode(self) -> int: ...


def describe(pool: LengthPool, mode: str, shape: _Shape | None = None) -> str:
    """``short (<= 2048 tokens): prefill 2, decode 4, autoscaled prefill 1..4`` for summaries."""
    limit = f"<= {pool.max_prompt_tokens} tokens" if pool.max_prompt_tokens is not None else "longer"
    if mode == "group":
        size = f"{pool.groups} x (prefill {shape.prefill} + decode {shape.decode})" if shape else ""
    elif mode == "pool":
        size = f"prefill {pool.prefill}, decode {pool.decode}"
    else:
        size = f"{pool.replicas} replicas"
    scaled = [
        f"{role} {b.min}..{b.max}"
        for role in ("both", "prefill", "decode")
        if (b := pool.bounds(role)) is not None
    ]
    zero = pool.autoscaler.scale_to_zero if pool.autoscaler is not None else None
    if zero is not None:
        scaled.append(f"to zero after {zero.after_s:g}s idle ({zero.scaler})")
    return f"{pool.name} ({limit}): {size}" + (f", autoscaled {', '.join(scaled)}" if scaled else "")


def router_buckets(pools: list[LengthPool]) -> list[dict[str, Any]]:
    """The router's ``policy.buckets``: one bucket per pool, named after it and routing to it."""
    out = []
    for p in pools:
        bucket: dict[str, Any] = {"name": p.name}
        if p.max_prompt_tokens is not None:
            bucket["max_tokens"] = p.max_prompt_tokens
        bucket["pools"] = [p.name]
        if p.spill_to is not None:
            bucket["spill_to"] = list(p.spill_to)
        out.append(bucket)
    return out
