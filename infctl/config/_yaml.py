"""YAML reading that remembers where every key came from.

:func:`read_mapping` returns plain dicts and lists plus a :data:`Locations` table mapping each key path to
the file and line it was written on, so a validation error about ``group.prefill`` can say ``x.yaml:12``.

Time and memory are bounded for any input: :func:`read_yaml` reads regular files of at most 4 MiB
(:func:`~infctl.config._files.read_text`), and the loader counts nodes as it composes them, each alias
counting as the whole subtree it repeats, so an alias bomb ("billion laughs") or a deep ``[[[[...`` stops
at its ``file:line`` after at most :data:`MAX_NODES` nodes instead of expanding into gigabytes later.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.error import MarkedYAMLError
from yaml.events import AliasEvent

from infctl.config._base import Loc, format_loc
from infctl.config._files import read_text
from infctl.errors import ConfigError

MAX_NODES = 100_000
"""Most YAML nodes (keys, values, items) one document may hold once its aliases are expanded.

A large router file (a thousand backends) holds about 10,000; a deployment profile a few hundred. Every alias
counts as the node count of what it refers to, so nine levels of nine aliases (9**9 values) fail here.
"""
MAX_DEPTH = 100
"""Deepest nesting of mappings and sequences (profiles nest about 6 deep); deeper is refused, not recursed."""

_BOMB_HINT = "write the repeated part out fewer times, or split the file; profiles hold a few hundred values"


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


class _Refused(MarkedYAMLError):
    """The document breaks a size or depth bound (not a syntax error): message and fix for ConfigError."""

    def __init__(self, problem: str, mark: Any, hint: str) -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.hint = hint


class LineLoader(yaml.SafeLoader):
    """A SafeLoader whose mappings and sequences remember each key's and item's line; duplicate keys fail.

    Composing counts nodes, an alias as the size of its anchor's subtree, and refuses a document over
    :data:`MAX_NODES` or :data:`MAX_DEPTH` where it crosses the bound, before anything is constructed.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0
        self._aliased = False
        self._sizes: dict[str, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            size = self._sizes.get(event.anchor or "")
            if event.anchor in self.anchors and size is None:
                raise _Refused(
                    f"the alias *{event.anchor} refers to the collection it is in (a recursive structure)",
                    event.start_mark,
                    "write the values out; a profile cannot contain itself",
                )
            self._aliased = True
            self._count(size or 0, event.start_mark)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark, _BOMB_HINT)
        before = self._nodes
        node = super().compose_node(parent, index)
        self._depth -= 1
        self._count(1, event.start_mark)
        if event.anchor is not None:
            self._sizes[event.anchor] = self._nodes - before
        return node

    def _count(self, n: int, mark: Any) -> None:
        self._nodes += n
        if self._nodes > MAX_NODES:
            what = (
                "YAML aliases expand the document past" if self._aliased else "the document holds more than"
            )
            raise _Refused(f"{what} {MAX_NODES:,} values (the limit for a profile)", mark, _BOMB_HINT)


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
    except _Refused as err:
        mark = err.problem_mark
        where = f"{shown}:{mark.line + 1}:{mark.column + 1}" if mark else shown
        raise ConfigError(f"{where}: {err.problem}", hint=err.hint) from None
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


def read_yaml(path: Path, shown: str) -> tuple[Any, Locations]:
    """Read and parse a YAML file (a regular file of at most 4 MiB) into plain data and its key locations."""
    return parse_yaml(read_text(path, shown), shown)


def read_mapping(path: Path, shown: str) -> tuple[dict[str, Any], Locations]:
    """Read a profile file whose top level must be a mapping."""
    data, locations = read_yaml(path, shown)
    if data is None:
        raise ConfigError(f"{shown}: the file is empty, expected a profile (a YAML mapping)")
    if not isinstance(data, dict):
        found = "a list" if isinstance(data, list) else f"the scalar {data!r}"
        raise ConfigError(
            f"{locations[()]}: expected a mapping of keys at the top level, found {found}",
            hint="a profile starts with keys such as `name:` and `mode:` (see profiles/ for examples)",
        )
    return data, locations
