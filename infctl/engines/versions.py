"""Engine versions: which release of an engine an image runs, and which of the flags it is given that release
lacks.

Each adapter keeps a table, flag -> the first release that accepts it (``EngineAdapter.flag_versions``),
and the oldest release the table was checked against (``EngineAdapter.oldest_checked``). A key is a flag
(``--kv-offloading-size``) or a flag with a fragment its value must contain to need that release
(``--speculative-algorithm=NGRAM``, ``--kv-transfer-config="kv_connector":"NixlConnector"``). Flags absent
from a table are in every release since the oldest checked one.

An image's release is read from its tag: ``v0.32.0``, ``0.5.4.post1``, ``v0.5.17-cu130`` (a build flavour
after ``-``). A tag that names no release (``latest``, ``nightly``, a pre-release, a digest alone) cannot be
checked: :func:`image_version` answers None and the caller skips the check.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from infctl.errors import ConfigError

Version = tuple[int, int, int]
"""A release as (major, minor, patch); post-releases count as their release."""

_TAG = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:\.post\d+)?(?:-[A-Za-z][A-Za-z0-9._-]*)?$")


def parse_version(text: str) -> Version | None:
    """``v0.11.1`` -> (0, 11, 1); ``0.5.4.post1`` and ``v0.5.17-cu130`` -> (0, 5, 4) and (0, 5, 17); a
    fourth number (vLLM's ``0.9.0.1`` hotfix) counts as its release. None for anything else, pre-releases
    (``0.12.0rc1``) included: a release candidate may lack what its release has."""
    m = _TAG.match(text.strip())
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def image_tag(image: str) -> str | None:
    """The tag of ``repo[:tag][@digest]``, None when it has none (a registry port is not a tag)."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else None


def image_version(image: str) -> Version | None:
    """The engine release an image runs, from its tag; None when the tag names none."""
    tag = image_tag(image)
    return parse_version(tag) if tag is not None else None


def show(version: Version) -> str:
    return ".".join(str(part) for part in version)


def release(image: str) -> str:
    """The release ``image`` runs as its engine reports it (``0.32.0`` for ``:v0.32.0``); the tag itself
    when it names none, ``unknown`` without a tag."""
    version = image_version(image)
    return show(version) if version else image_tag(image) or "unknown"


@dataclass(frozen=True, slots=True)
class FlagNeed:
    """A flag (or a flag with a value) the command line uses, and the first release that accepts it."""

    flag: str
    """As written in the table: ``--kv-offloading-size`` or ``--speculative-algorithm=NGRAM``."""
    since: Version

    def describe(self) -> str:
        flag, _, fragment = self.flag.partition("=")
        return f"{flag} {fragment}" if fragment else flag


def needs(argv: Sequence[str], table: Mapping[str, Version]) -> list[FlagNeed]:
    """The table entries ``argv`` uses, in table order. A flag's value is the next word, or what follows
    ``=`` in the same word."""
    values: dict[str, list[str]] = {}
    for i, word in enumerate(argv):
        if not word.startswith("--"):
            continue
        flag, eq, inline = word.partition("=")
        value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else "")
        values.setdefault(flag, []).append(value)
    found = []
    for key, since in table.items():
        flag, eq, fragment = key.partition("=")
        given = values.get(flag)
        if given is not None and (not eq or any(fragment in v for v in given)):
            found.append(FlagNeed(key, since))
    return found


def lacking(argv: Sequence[str], table: Mapping[str, Version], version: Version) -> list[FlagNeed]:
    """The entries ``argv`` uses that release ``version`` does not have yet."""
    return [n for n in needs(argv, table) if version < n.since]


class _Versioned(Protocol):
    """What :func:`check_image` reads from an adapter (any ``EngineAdapter``)."""

    @property
    def name(self) -> str: ...
    @property
    def default_image(self) -> str: ...
    @property
    def flag_versions(self) -> Mapping[str, Version]: ...
    @property
    def oldest_checked(self) -> Version: ...


def check_image(adapter: _Versioned, image: str, argv: Sequence[str]) -> None:
    """Raise ConfigError when ``image`` runs a release of ``adapter``'s engine that lacks a flag of ``argv``
    (naming each such flag and the first release that has it) or one older than the table knows. An image
    whose tag names no release is not checked."""
    version = image_version(image)
    if version is None:
        return
    engine, default = adapter.name, adapter.default_image
    if version < adapter.oldest_checked:
        oldest = show(adapter.oldest_checked)
        raise ConfigError(
            f"image {image} runs {engine} {show(version)}, older than {engine} {oldest}, the oldest release "
            "infctl knows the flags of",
            hint=f"set model.image to {engine} {oldest} or later (the default is {default})",
        )
    missing = lacking(argv, adapter.flag_versions, version)
    if not missing:
        return
    each = ", ".join(f"{n.describe()} (first in {engine} {show(n.since)})" for n in missing)
    newest = show(max(n.since for n in missing))
    raise ConfigError(
        f"image {image} runs {engine} {show(version)}, which lacks {each}",
        hint=f"set model.image to {engine} {newest} or later (the default is {default}), or drop the profile "
        "setting that asks for the flag",
    )
