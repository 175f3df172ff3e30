"""``--set key.path=value`` overrides, applied to a profile's raw data before validation.

Key paths use the same spelling as error messages: ``group.decode``, ``model.kv_offload.backend``,
``cluster.tolerations[0].effect``. Values are read as YAML, so ``3`` is an integer, ``true`` a boolean,
``[--foo, --bar]`` a list, and ``null`` (or nothing after ``=``) removes the key so its default applies.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from infctl.config._base import Loc, format_loc
from infctl.errors import ConfigError

_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*?)?((?:\[\d+\])*)$")
_HINT = (
    "write --set KEY.PATH=VALUE, e.g. --set group.decode=3 or --set cluster.tolerations[0].effect=NoSchedule"
)


def parse_override(expr: str) -> tuple[Loc, Any]:
    """``"group.decode=3"`` -> ``(("group", "decode"), 3)``."""
    key, sep, text = expr.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {expr}: expected KEY.PATH=VALUE, found no '='", hint=_HINT)
    return parse_key_path(key.strip(), expr), _parse_value(text)


def parse_key_path(key: str, expr: str | None = None) -> Loc:
    """``"cluster.tolerations[1].effect"`` -> ``("cluster", "tolerations", 1, "effect")``."""
    loc: list[str | int] = []
    for part in key.split("."):
        match = _PART.match(part)
        if not part or match is None or not (match.group(1) or (match.group(2) and loc)):
            raise ConfigError(
                f"--set {expr or key}: expected a key path like group.decode or "
                f"tolerations[0].effect, found {key!r}",
                hint=_HINT,
            )
        if match.group(1):
            loc.append(match.group(1))
        loc.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return tuple(loc)


def _parse_value(text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        # `--set model.image=repo/x:tag: odd` is still clearly meant as a string.
        return text


def set_value(data: dict[str, Any], loc: Loc, value: Any, expr: str) -> None:
    """Set ``data[loc] = value`` in place, creating missing mappings on the way; None removes a key."""
    node: Any = data
    for depth, part in enumerate(loc[:-1]):
        node = _step(node, part, loc[: depth + 1], loc[depth + 1], expr)
    last = loc[-1]
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise _cannot(expr, loc, node)
        node[last] = value
    elif isinstance(node, dict) and value is None:
        node.pop(last, None)
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise _cannot(expr, loc, node)


def _step(node: Any, part: str | int, here: Loc, following: str | int, expr: str) -> Any:
    if isinstance(part, int):
        if not isinstance(node, list) or part >= len(node):
            raise _cannot(expr, here, node)
        return node[part]
    if not isinstance(node, dict):
        raise _cannot(expr, here, node)
    if node.get(part) is None:
        if isinstance(following, int):
            raise _cannot(expr, (*here, following), None)
        node[part] = {}
    return node[part]


def _cannot(expr: str, loc: Loc, parent: Any) -> ConfigError:
    if isinstance(parent, list):
        found = f"a list of {len(parent)} item{'' if len(parent) == 1 else 's'}"
    elif isinstance(parent, dict):
        found = "a mapping"
    else:
        found = "nothing" if parent is None else f"the scalar {parent!r}"
    return ConfigError(
        f"--set {expr}: cannot set {format_loc(loc)}: its parent is {found}",
        hint="list items must already exist; check the key path against the profile",
    )


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A deep copy of ``raw`` with each ``KEY.PATH=VALUE`` of ``overrides`` applied, in order."""
    data = copy.deepcopy(dict(raw))
    for expr in overrides:
        loc, value = parse_override(expr)
        set_value(data, loc, value, expr)
    return data
