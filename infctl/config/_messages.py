"""Turning pydantic's validation errors into 'key.path: expected X, found Y' lines a person can act on.

What a key expects is read from the model's own annotations (``Count`` -> "an integer >= 1"), so messages stay
right when fields change.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from infctl.config._base import Loc, ProfileProblems, format_loc


@dataclass(frozen=True, slots=True)
class Explained:
    loc: Loc
    text: str
    hint: str | None = None
    anchor: Loc | None = None


@dataclass(frozen=True, slots=True, eq=False)
class OneOf:
    """A string field's valid values read when a value is validated, not when the model is defined (the
    keys of a registry that may grow, such as the engines). Put it in ``Annotated`` twice: as metadata, which
    :func:`describe` reads, and as the ``BeforeValidator``, which raises the same words as a ``Literal``.
    Compared and hashed by identity (``typing`` hashes ``Annotated`` metadata; a registry is a live view)."""

    names: Collection[str]

    def expected(self) -> str:
        return "one of " + ", ".join(repr(name) for name in self.names)

    def __call__(self, value: object) -> object:
        if isinstance(value, str) and value in self.names:
            return value
        guess = _did_you_mean(value, list(self.names)) if isinstance(value, str) else ""
        raise ValueError(f"expected {self.expected()}, found {found(value)}{guess}")


def explain(err: ErrorDetails, root: type[BaseModel], data: Any = None) -> list[Explained]:
    """One pydantic error as one or more located messages (a model validator may report several);
    ``data``, what was validated, keeps an unknown key's suggestion off the keys already written."""
    loc: Loc = tuple(err["loc"])
    kind, value = err["type"], err.get("input")
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, ProfileProblems):
        return [
            Explained((*loc, *p.loc), p.message, p.hint, None if p.anchor is None else (*loc, *p.anchor))
            for p in cause.problems
        ]
    if kind == "value_error" and cause is not None:
        return [Explained(loc, str(cause))]
    if kind == "extra_forbidden":
        return [_unknown_key(loc, root, _keys_at(data, loc[:-1]))]
    field = _annotation_at(root, loc)
    if field is None:  # not a declared field (e.g. a non-string key): pydantic's words are all there is
        return [Explained(loc, f"{err['msg'][0].lower()}{err['msg'][1:]}, found {found(value)}")]
    expected = describe(*field)
    if kind == "missing":
        return [Explained(loc, f"expected {expected}, found nothing (the key is required)")]
    text = f"expected {expected}, found {found(value)}"
    if kind == "literal_error" and isinstance(value, str) and field:
        text += _did_you_mean(value, [str(a) for a in get_args(_unwrap(field[0])[0])])
    return [Explained(loc, text)]


def _keys_at(data: Any, loc: Loc) -> set[str]:
    """The keys of the mapping at ``loc`` in ``data`` (none when there is no such mapping)."""
    for part in loc:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return set()
    return {str(k) for k in data} if isinstance(data, dict) else set()


def _unknown_key(loc: Loc, root: type[BaseModel], written: set[str]) -> Explained:
    key = str(loc[-1])
    parent = _annotation_at(root, loc[:-1]) if loc[:-1] else (root, [])
    model = _unwrap(parent[0])[0] if parent else None
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return Explained(loc, "unknown key")
    valid = list(model.model_fields)
    where = f" under {format_loc(loc[:-1])}" if loc[:-1] else ""
    # `modle:` beside `mode:` means `model:`, not the `mode:` already there
    guess = _did_you_mean(key, [k for k in valid if k not in written])
    return Explained(loc, f"unknown key {key!r}{guess}", hint=f"valid keys{where}: {', '.join(valid)}")


def _did_you_mean(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[word.lower()]] if word.lower() in lowered else []
    return f"; did you mean {close[0]!r}?" if close else ""


def found(value: Any) -> str:
    """A value as the user wrote it in YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value) if isinstance(value, str) else str(value)


def _unwrap(ann: Any) -> tuple[Any, list[Any]]:
    """Strip ``X | None`` and ``Annotated[X, ...]``, collecting constraint metadata."""
    meta: list[Any] = []
    while True:
        origin = get_origin(ann)
        if origin is Annotated:
            ann, *extra = get_args(ann)
            for item in extra:
                meta.extend(item.metadata if isinstance(item, FieldInfo) else [item])
        elif origin in (Union, types.UnionType):
            members = [a for a in get_args(ann) if a is not type(None)]
            if len(members) != 1:
                return ann, meta
            ann = members[0]
        else:
            return ann, meta


def _annotation_at(root: type[BaseModel], loc: Loc) -> tuple[Any, list[Any]] | None:
    """The annotation and constraints of the field at ``loc``, or None when it cannot be resolved."""
    ann: Any = root
    meta: list[Any] = []
    for part in loc:
        ann, _ = _unwrap(ann)
        origin = get_origin(ann)
        if isinstance(part, str) and isinstance(ann, type) and issubclass(ann, BaseModel):
            info = ann.model_fields.get(part)
            if info is None:
                return None
            ann, meta = info.annotation, list(info.metadata)
        elif isinstance(part, int) and origin is list:
            ann, meta = get_args(ann)[0], []
        elif origin is dict:
            ann, meta = get_args(ann)[1], []
        else:
            return None
    return ann, meta


_NOUNS: dict[Any, str] = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    Path: "a path",
}


def describe(ann: Any, meta: list[Any]) -> str:
    """What a value of this annotation looks like, in words: ``an integer between 1 and 65535``."""
    ann, more = _unwrap(ann)
    meta = [*meta, *more]
    origin = get_origin(ann)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(ann))
    one_of = next((m for m in meta if isinstance(m, OneOf)), None)
    if one_of is not None:
        return one_of.expected()
    if origin is list:
        return "a list"
    if origin is dict or (isinstance(ann, type) and issubclass(ann, BaseModel)):
        return "a mapping"
    noun = _NOUNS.get(ann, "a value")
    if ann is str:
        # Patterns are not shown: a regex means nothing to most readers (use a validator with words instead).
        nonempty = any(isinstance(m, at.MinLen) and m.min_length >= 1 for m in meta)
        return "a non-empty string" if nonempty else noun
    bounds = [m for m in meta if isinstance(m, at.Ge | at.Gt | at.Le | at.Lt)]
    if len(bounds) == 2 and isinstance(bounds[0], at.Ge) and isinstance(bounds[1], at.Le):
        return f"{noun} between {_num(bounds[0].ge)} and {_num(bounds[1].le)}"
    return f"{noun} {' and '.join(_bound(m) for m in bounds)}" if bounds else noun


def _bound(m: at.Ge | at.Gt | at.Le | at.Lt) -> str:
    if isinstance(m, at.Ge):
        return f">= {_num(m.ge)}"
    if isinstance(m, at.Gt):
        return f"> {_num(m.gt)}"
    if isinstance(m, at.Le):
        return f"<= {_num(m.le)}"
    return f"< {_num(m.lt)}"


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)
