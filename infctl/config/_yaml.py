"""YAML reading that remembers where every key came from.

:func:`read_mapping` returns plain dicts and lists plus a :data:`Locations` table mapping each key path to
the file and line it was written on, so a validation error about ``group.prefill`` can say ``x.yaml:12``.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError

from infctl.config._base import Loc, format_loc
from infctl.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value was written: a file and line, or a ``--set`` flag (line None)."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return self.file if self.line is None else f"{self.file}:{self.line}"


Locations = dict[Loc, Source]


class _Map(dict[Any, Any]):
    line = 0
    key_lines: dict[Any, int]


class _Seq(list[Any]):
    line = 0
    item_lines: list[int]


class LineLoader(yaml.SafeLoader):
    """A SafeLoader whose mappings and sequences remember each key's and item's line; duplicate keys fail."""


def _construct_map(loader: LineLoader, node: yaml.MappingNode) -> Iterator[_Map]:
    data = _Map()
    data.line, data.key_lines = node.start_mark.line + 1, {}
    yield data
    _reject_duplicates(node)
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found an unhashable key",
                key_node.start_mark,
            )
        data.key_lines[key] = key_node.start_mark.line + 1
        data[key] = loader.construct_object(value_node)


def _reject_duplicates(node: yaml.MappingNode) -> None:
    # Checked before merge keys (`<<`) are flattened: a key overriding a merged one is not a duplicate.
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        line = key_node.start_mark.line + 1
        if key_node.value in seen:
            raise ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key_node.value!r} (first at line {seen[key_node.value]})",
                key_node.start_mark,
            )
        seen[key_node.value] = line


def _construct_seq(loader: LineLoader, node: yaml.SequenceNode) -> Iterator[_Seq]:
    data = _Seq()
    data.line, data.item_lines = node.start_mark.line + 1, [item.start_mark.line + 1 for item in node.value]
    yield data
    data.extend(loader.construct_object(item) for item in node.value)


LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_map)
LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_seq)


def parse_yaml(text: str, shown: str) -> tuple[Any, Locations]:
    """Parse ``text`` (from the file shown as ``shown``) into plain data and the locations of its keys."""
    try:
        data = yaml.load(text, Loader=LineLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark else shown
        problem = err.problem or err.context or "unreadable YAML"
        hint = (
            "remove or rename one of the two"
            if "duplicate key" in problem
            else "check indentation and quoting on that line and the one above it"
        )
        raise ConfigError(f"{where}: YAML syntax error: {problem}", hint=hint) from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{shown}: YAML error: {err}") from err
    locations: Locations = {(): Source(shown, getattr(data, "line", 1) or 1)}
    return _plain(data, (), shown, locations, ()), locations


def _plain(obj: Any, loc: Loc, shown: str, out: Locations, stack: tuple[int, ...]) -> Any:
    if not isinstance(obj, _Map | _Seq):
        return obj
    if id(obj) in stack:
        raise ConfigError(f"{out[loc]}: {format_loc(loc)}: a YAML alias refers to itself")
    stack = (*stack, id(obj))
    if isinstance(obj, _Map):
        result = {}
        for key, value in obj.items():
            out[(*loc, key)] = Source(shown, obj.key_lines.get(key, obj.line))
            result[key] = _plain(value, (*loc, key), shown, out, stack)
        return result
    items = []
    for i, value in enumerate(obj):
        out[(*loc, i)] = Source(shown, obj.item_lines[i])
        items.append(_plain(value, (*loc, i), shown, out, stack))
    return items


def read_mapping(path: Path, shown: str) -> tuple[dict[str, Any], Locations]:
    """Read a profile file whose top level must be a mapping."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{shown}: file not found", hint=nearby_hint(path)) from None
    except IsADirectoryError:
        raise ConfigError(
            f"{shown}: is a directory, expected a YAML file", hint=nearby_hint(path / "x")
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"{shown}: cannot read: {err}") from err
    data, locations = parse_yaml(text, shown)
    if data is None:
        raise ConfigError(f"{shown}: the file is empty, expected a profile (a YAML mapping)")
    if not isinstance(data, dict):
        found = "a list" if isinstance(data, list) else f"the scalar {data!r}"
        raise ConfigError(
            f"{locations[()]}: expected a mapping of keys at the top level, found {found}",
            hint="a profile starts with keys such as `name:` and `mode:` (see profiles/ for examples)",
        )
    return data, locations


def nearby_hint(path: Path) -> str:
    folder = path.parent
    if not folder.is_dir():
        return f"the folder {folder} does not exist either; paths are relative to the working directory"
    found = sorted(p.name for p in folder.glob("*.y*ml"))[:8]
    return f"YAML files in {folder}: {', '.join(found)}" if found else f"{folder} holds no YAML files"
