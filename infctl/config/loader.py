"""Loading profiles from YAML, with errors that name the file, line and key path.

A deployment may give ``model:`` and ``cluster:`` inline or as a path relative to the deployment file
(``model: models/qwen3-8b-vllm.yaml``). Overrides (``--set group.decode=3``) apply after references are
read, so they can reach into referenced profiles (``--set model.tensor_parallel_size=4``).

Every failure raises :class:`~infctl.errors.ConfigError`, one line per problem (up to ten), e.g.::

    profiles/x.yaml:12: group.prefill: expected an integer >= 1, found 0
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError

from infctl.config._base import Loc, format_loc
from infctl.config._files import nearby_hint
from infctl.config._messages import Explained, explain
from infctl.config._yaml import Locations, Source, read_mapping
from infctl.config.overrides import parse_override, set_value
from infctl.errors import ConfigError

if TYPE_CHECKING:
    # Each loader imports its own model: the router's start-up loads a router file and should not build
    # the profile models (~0.2 s of pydantic class building).
    from infctl.config.cluster import ClusterProfile
    from infctl.config.deployment import DeploymentProfile
    from infctl.config.model import ModelProfile
    from infctl.config.router import RouterFile

MAX_PROBLEMS = 10
"""Problems listed in one error; the rest are counted."""

P = TypeVar("P", bound=BaseModel)
AnyProfile: TypeAlias = "DeploymentProfile | ModelProfile | ClusterProfile"
_REFERENCES = ("model", "cluster")


def load_deployment(path: str | Path, overrides: Sequence[str] = ()) -> DeploymentProfile:
    """Read, resolve references, apply ``KEY.PATH=VALUE`` overrides and validate a deployment profile."""
    from infctl.config.deployment import DeploymentProfile

    path = Path(path)
    raw, locations = read_mapping(path, str(path))
    kind = profile_kind(raw)
    if kind != "deployment":
        # Else every deployment key is reported missing and `model: Qwen/Qwen3-8B` read as a file path.
        raise ConfigError(
            f"{locations[()]}: a {kind} profile, not a deployment "
            f"(it has `{_KIND_KEYS[kind]}:` and no `mode:`)",
            hint=f"give a deployment profile, one that names this file as its `{kind}:`; "
            f"infctl validate -f {shlex.quote(str(path))} checks it alone",
        )
    return _validate(DeploymentProfile, raw, locations, path, overrides, references=True)


def load_model(path: str | Path, overrides: Sequence[str] = ()) -> ModelProfile:
    """Read and validate a model profile (``profiles/models/*.yaml``)."""
    from infctl.config.model import ModelProfile

    return _load(ModelProfile, Path(path), overrides)


def load_cluster(path: str | Path, overrides: Sequence[str] = ()) -> ClusterProfile:
    """Read and validate a cluster profile (``profiles/clusters/*.yaml``)."""
    from infctl.config.cluster import ClusterProfile

    return _load(ClusterProfile, Path(path), overrides)


def load_router(path: str | Path, overrides: Sequence[str] = ()) -> RouterFile:
    """Read and validate a router file (``infctl router -f router.yaml``)."""
    from infctl.config.router import RouterFile

    return _load(RouterFile, Path(path), overrides, check="infctl router -f")


def load_profile(path: str | Path, overrides: Sequence[str] = ()) -> AnyProfile:
    """Any of the three, told apart by their keys (``engine`` -> model, ``switch_label`` -> cluster)."""
    from infctl.config.cluster import ClusterProfile
    from infctl.config.deployment import DeploymentProfile
    from infctl.config.model import ModelProfile

    path = Path(path)
    raw, locations = read_mapping(path, str(path))
    kind = profile_kind(raw)
    if kind == "model":
        return _validate(ModelProfile, raw, locations, path, overrides)
    if kind == "cluster":
        return _validate(ClusterProfile, raw, locations, path, overrides)
    return _validate(DeploymentProfile, raw, locations, path, overrides, references=True)


_KIND_KEYS = {"model": "engine", "cluster": "switch_label"}


def profile_kind(raw: dict[str, Any]) -> str:
    """``model``, ``cluster`` or ``deployment``, told apart by their keys: a deployment has ``mode``; else
    ``engine`` makes a model profile and ``switch_label`` a cluster profile."""
    if "mode" not in raw:
        for kind, key in _KIND_KEYS.items():
            if key in raw:
                return kind
    return "deployment"


def _load(
    cls: type[P],
    path: Path,
    overrides: Sequence[str],
    *,
    references: bool = False,
    check: str = "infctl validate -f",
) -> P:
    raw, locations = read_mapping(path, str(path))
    return _validate(cls, raw, locations, path, overrides, references=references, check=check)


def _validate(
    cls: type[P],
    raw: dict[str, Any],
    locs: Locations,
    path: Path,
    overrides: Sequence[str],
    *,
    references: bool = False,
    check: str = "infctl validate -f",
) -> P:
    """``references``: the file may name other files (a deployment's ``model`` and ``cluster``); ``check``:
    the command that reads the file again, for the hint (``validate`` knows profiles, not daemon files),
    given the overrides too, so that it shows the same error."""
    if references:
        _resolve_references(raw, locs, path)
    for expr in overrides:
        loc, value = parse_override(expr)
        set_value(raw, loc, value, expr)
        for stale in [k for k in locs if k[: len(loc)] == loc]:
            del locs[stale]
        locs[loc] = Source(f"--set {expr}")
        for n in range(1, len(loc)):  # a key the flag made up (--set nosuch.key=1) is the flag's too
            locs.setdefault(loc[:n], locs[loc])
    if references and overrides:
        _resolve_references(raw, locs, path)  # an override may have named another file
    try:
        return cls.model_validate(raw)
    except ValidationError as err:
        problems = [e for d in err.errors() for e in explain(d, cls, raw)]
        raise _config_error(problems, locs, str(path), _again_command(check, path, overrides)) from None


def _resolve_references(raw: dict[str, Any], locs: Locations, path: Path) -> None:
    for key in _REFERENCES:
        ref = raw.get(key)
        if not isinstance(ref, str):
            continue
        where = locs.get((key,), locs[()])
        target = path.parent / ref
        shown = os.path.normpath(target)
        if not target.is_file():
            raise ConfigError(
                f"{where}: {key}: expected a {key} profile (a path relative to {path.parent or '.'}/), "
                f"found no file at {shown}",
                hint=nearby_hint(target, base=f"the folder of {path}"),
            )
        sub, sub_locs = read_mapping(target, shown)
        raw[key] = sub
        locs.update({(key, *k): v for k, v in sub_locs.items()})


def _again_command(check: str, path: Path, overrides: Sequence[str]) -> str:
    """``check`` run on ``path`` with the same ``--set`` overrides, shell-quoted, ready to paste: without
    them the command would check another profile (``--set group.decode=0`` is the mistake, the file is
    fine)."""
    sets = [word for expr in overrides for word in ("--set", expr)]
    return " ".join([check, *map(shlex.quote, [str(path), *sets])])


def _config_error(problems: list[Explained], locs: Locations, shown: str, again: str) -> ConfigError:
    files: dict[str, int] = {}
    for src in locs.values():
        files.setdefault(src.file, len(files))
    located = sorted(
        ((_source(locs, p.loc, p.anchor), p) for p in problems),
        key=lambda sp: (files.get(sp[0].file, len(files)), sp[0].line or 0),
    )
    lines: list[str] = []
    for src, p in located:
        line = f"{src}: {format_loc(p.loc)}: {p.text}"
        if line not in lines:
            lines.append(line)
    if len(lines) == 1:
        return ConfigError(lines[0], hint=located[0][1].hint or f"fix it, then check again with: {again}")
    listed = [f"  {line}" for line in lines[:MAX_PROBLEMS]]
    if len(lines) > MAX_PROBLEMS:
        listed.append(f"  ... and {len(lines) - MAX_PROBLEMS} more")
    return ConfigError(
        f"{shown}: {len(lines)} problems\n" + "\n".join(listed),
        hint=f"fix each, then check again with: {again}",
    )


def _source(locs: Locations, loc: Loc, anchor: Loc | None = None) -> Source:
    """Where ``loc`` was written, else ``anchor``, else its nearest written ancestor."""
    if loc not in locs and anchor is not None and anchor in locs:
        return locs[anchor]
    for n in range(len(loc), -1, -1):
        if loc[:n] in locs:
            return locs[loc[:n]]
    return Source("?")
