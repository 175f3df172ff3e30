"""Length distributions for prompts and outputs: fixed, uniform, normal, lognormal (clamped to [min, max])."""

from __future__ import annotations

import math
import random
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from infctl.errors import ConfigError

DistKind = Literal["fixed", "uniform", "normal", "lognormal"]


class Strict(BaseModel):
    """Base of bench's config models: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class LengthDist(Strict):
    """A token-length distribution. Written on the command line as ``512``, ``uniform:256,768``,
    ``normal:512,64`` (mean, std) or ``lognormal:512,0.5`` (mean, sigma of the log)."""

    kind: DistKind = "fixed"
    mean: float = Field(default=128.0, gt=0)
    """The fixed value, or the distribution's mean (uniform: (low + high) / 2)."""
    std: float = Field(default=0.0, ge=0)
    """normal: standard deviation, in tokens."""
    sigma: float = Field(default=0.0, ge=0)
    """lognormal: standard deviation of the logarithm (0.5 is a typical chat-length spread)."""
    low: int | None = Field(default=None, ge=1)
    """uniform: smallest value."""
    high: int | None = Field(default=None, ge=1)
    """uniform: largest value (inclusive)."""
    min: int = Field(default=1, ge=1)
    """Samples below are raised to this."""
    max: int | None = Field(default=None, ge=1)
    """Samples above are lowered to this; None: no cap."""

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.kind == "uniform" and (self.low is None or self.high is None or self.low > self.high):
            raise ValueError("uniform needs low <= high")
        return self

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            x = self.mean
        elif self.kind == "uniform":
            assert self.low is not None and self.high is not None
            return self._clamp(rng.randint(self.low, self.high))
        elif self.kind == "normal":
            x = rng.gauss(self.mean, self.std)
        else:
            x = rng.lognormvariate(math.log(self.mean) - self.sigma**2 / 2, self.sigma)
        return self._clamp(round(x))

    def _clamp(self, n: int) -> int:
        n = max(self.min, n)
        return min(n, self.max) if self.max is not None else n

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"{self.mean:g}"
        if self.kind == "uniform":
            return f"uniform:{self.low},{self.high}"
        if self.kind == "normal":
            return f"normal:{self.mean:g},{self.std:g}"
        return f"lognormal:{self.mean:g},{self.sigma:g}"

    @classmethod
    def parse(cls, text: str, *, what: str = "length") -> LengthDist:
        """Read the command-line form (see the class docstring)."""
        kind, sep, params = text.strip().partition(":")
        if not sep:
            kind, params = "fixed", kind
        try:
            nums = [float(p) for p in params.split(",")]
            if kind == "fixed" and len(nums) == 1:
                return cls(kind="fixed", mean=nums[0])
            if kind == "uniform" and len(nums) == 2:
                return cls(kind="uniform", low=int(nums[0]), high=int(nums[1]), mean=(nums[0] + nums[1]) / 2)
            if kind == "normal" and len(nums) == 2:
                return cls(kind="normal", mean=nums[0], std=nums[1])
            if kind == "lognormal" and len(nums) == 2:
                return cls(kind="lognormal", mean=nums[0], sigma=nums[1])
        except ValueError:
            pass
        raise ConfigError(
            f"{what}: cannot read {text!r} as a length distribution",
            hint="write 512, uniform:256,768, normal:512,64 (mean,std) or lognormal:512,0.5 (mean,sigma)",
        )
