"""Calibrated simulator profiles: the extra step-time terms a real engine shows, and the profile file format.

A profile file is YAML or JSON holding one mapping: every :class:`~infctl.sim.profiles.SimProfile` field,
optionally the two :class:`CalibratedProfile` terms, and a free-form ``calibration`` section (where and how
it was measured, the fit's residuals) that loading ignores. ``infctl sim --profile FILE`` loads one through
``infctl.sim.profiles.get_profile``; ``infctl sim calibrate --out FILE`` writes one.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infctl.errors import ConfigError
from infctl.sim.calib_fit import chunks as split_prefill
from infctl.sim.profiles import PrefillChunks, SimProfile, check_fields

FORMAT_KEY = "infctl_sim_profile"
"""Marks a file as a simulator profile; its value is the format version."""
FORMAT_VERSION = 1
METADATA_KEY = "calibration"


@dataclass(frozen=True)
class CalibratedProfile(SimProfile):
    """A profile fitted to a real engine, with two step terms the stock model lacks (both 0 by default).

    ``step_us = beta0 + beta1 * p + beta2 * d + attn * ctx / 1e3 + prefill_step * [p > 0]
    + prefill_quad * sum over chunks of ((prefix + c)^2 - prefix^2) / 1e6``: ``p`` prefill tokens in the step,
    ``d`` decoding sequences, each request's chunk of ``c`` tokens attending to its ``prefix`` computed
    before it and to itself (causal: ``c * (prefix + c / 2)``, doubled so that a lone chunk with no prefix
    costs ``prefill_quad * (c / 1e3)^2``). Over a request's chunks the term sums to ``prefill_quad *
    (prompt / 1e3)^2``, however the prompt was split.
    """

    prefill_step_us: float = 0.0
    """Extra fixed cost of a step that computes prefill tokens, microseconds. Calibration no longer fits it
    (0): the per-request cost it used to absorb is the API server's, ``request_overhead_us``, which delays
    the request instead of stalling the batch. Kept so profile files that set it still load and run."""
    prefill_quad_us_per_ktok2: float = 0.0
    """Cost of causal attention inside prefill chunks, microseconds per squared thousand tokens (see the
    class docstring for how chunks and prefixes count)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for key in ("prefill_step_us", "prefill_quad_us_per_ktok2"):
            value = getattr(self, key)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"profile {self.name!r}: {key} must be >= 0, got {value}")

    @property
    def uses_prefill_chunks(self) -> bool:
        return self.prefill_quad_us_per_ktok2 > 0

    def step_time(
        self,
        prefill_tokens: int,
        decode_seqs: int,
        decode_context_tokens: int,
        chunks: PrefillChunks | None = None,
    ) -> float:
        base = super().step_time(prefill_tokens, decode_seqs, decode_context_tokens)
        if prefill_tokens <= 0:
            return base
        if chunks is None:
            squares = float(prefill_tokens * prefill_tokens)
        else:
            squares = float(sum(c * (2 * prefix + c) for c, prefix in chunks))
        extra = self.prefill_step_us + self.prefill_quad_us_per_ktok2 * squares * 1e-6
        return base + extra * 1e-6

    def expected_ttft(self, prompt_tokens: int, cached_tokens: int = 0) -> float:
        computed = prompt_tokens - min(cached_tokens, prompt_tokens - 1)
        prefix = prompt_tokens - computed
        total = self.request_overhead(prompt_tokens)
        for c in split_prefill(computed, self.max_num_batched_tokens):
            total += self.step_time(c, 0, 0, [(c, prefix)])
            prefix += c
        return total


def profile_to_dict(profile: SimProfile, metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The file form of ``profile``: format marker, every field, then ``calibration`` metadata if any."""
    out: dict[str, Any] = {FORMAT_KEY: FORMAT_VERSION, **dataclasses.asdict(profile)}
    if metadata:
        out[METADATA_KEY] = metadata
    return out


def profile_from_dict(data: Any, *, source: str = "<profile>") -> SimProfile:
    """A :class:`SimProfile` (a :class:`CalibratedProfile` when either extra term is present)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping of profile fields, found {type(data).__name__}")
    fields = {k: v for k, v in data.items() if k not in (FORMAT_KEY, METADATA_KEY)}
    version = data.get(FORMAT_KEY, FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise ConfigError(
            f"{source}: {FORMAT_KEY} {version!r} is not supported (this infctl reads {FORMAT_VERSION})",
            hint="re-run `infctl sim calibrate` with this infctl to write a current profile",
        )
    extra = {f.name for f in dataclasses.fields(CalibratedProfile)} - {
        f.name for f in dataclasses.fields(SimProfile)
    }
    cls: type[SimProfile] = CalibratedProfile if extra & set(fields) else SimProfile
    check_fields(cls, fields, f"{source}: unknown profile field(s)")
    try:
        return cls(**fields)
    except TypeError as exc:  # a required field is missing
        raise ConfigError(
            f"{source}: {exc}", hint="write the file with `infctl sim calibrate --out`"
        ) from None


def load_profile_file(path: Path) -> SimProfile:
    """Read a profile file (YAML, or JSON, which YAML also reads): a regular file of at most 4 MiB."""
    from infctl.config import read_yaml

    try:
        data, _ = read_yaml(path, str(path))
    except ConfigError as err:  # the message starts with the path (and line)
        raise ConfigError(f"cannot read simulator profile {err.message}", hint=err.hint) from None
    return profile_from_dict(data, source=str(path))


def write_profile_file(path: Path, profile: SimProfile, metadata: dict[str, Any] | None = None) -> None:
    """Write JSON when ``path`` ends in ``.json``, else YAML."""
    data = profile_to_dict(profile, metadata)
    if path.suffix == ".json":
        text = json.dumps(data, indent=2) + "\n"
    else:
        text = yaml.safe_dump(data, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def looks_like_path(name: str) -> bool:
    """True when a ``--profile`` value names a file rather than a built-in profile."""
    return "/" in name or name.endswith((".yaml", ".yml", ".json"))
