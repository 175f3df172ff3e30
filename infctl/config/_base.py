"""What every profile model shares: strictness, small constrained types, and cross-field problem reports.

Cross-field checks raise :class:`ProfileProblems` from a model validator. Each :class:`Problem` names the key
it is about, relative to the model that found it, so the loader can point at that key's line instead of at
the enclosing mapping, and can report several problems at once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

Loc = tuple[str | int, ...]
"""A key path inside a profile, e.g. ``("cluster", "tolerations", 1, "effect")``."""

Count = Annotated[int, Field(ge=1)]
"""A number of things that must exist: replicas, GPUs, groups."""
Port = Annotated[int, Field(ge=1, le=65535)]
"""A TCP port."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


class ProfileModel(BaseModel):
    """Base of every profile model: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        # YAML reads `CUDA_VISIBLE_DEVICES: 0` as an int; env values and names are strings.
        coerce_numbers_to_str=True,
    )


@dataclass(frozen=True, slots=True)
class Problem:
    """One cross-field problem: where (relative to the model that found it), what, and the fix."""

    loc: Loc
    message: str
    """Phrased as 'expected ..., found ...' or as a plain rule, without the key path."""
    hint: str | None = None
    anchor: Loc | None = None
    """A key to point at when ``loc`` itself is absent from the file (e.g. ``mode`` for a missing layout)."""


class ProfileProblems(ValueError):
    """Raised by model validators; the loader unpacks ``problems`` into file:line messages."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"{format_loc(p.loc)}: {p.message}" for p in self.problems))


def raise_problems(problems: Sequence[Problem]) -> None:
    if problems:
        raise ProfileProblems(problems)


def format_loc(loc: Loc) -> str:
    """``("cluster", "tolerations", 1, "effect")`` -> ``cluster.tolerations[1].effect``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def check_dns_label(value: str) -> str:
    if not _DNS_LABEL.match(value):
        raise ValueError(
            f"expected a DNS-1123 label (a-z, 0-9 and '-', at most 63 characters), found {value!r}"
        )
    return value


def check_name(value: str) -> str:
    """A lowercase identifier such as a policy or simulator profile name (``llama3-8b-h100``)."""
    if not _NAME.match(value):
        raise ValueError(f"expected a lowercase name (a-z, 0-9, '.', '_' and '-'), found {value!r}")
    return value


def check_label_key(value: str) -> str:
    """A Kubernetes label key: optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    prefix, _, name = value.rpartition("/")
    if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or not _LABEL_NAME.match(name):
        raise ValueError(
            f"expected a Kubernetes label key such as 'network.topology.nvidia.com/block', found {value!r}"
        )
    return value
