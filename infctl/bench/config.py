"""``BenchConfig``: everything one benchmark run needs, validated (the CLI builds it; the demo may too).

Example (a library caller)::

    cfg = BenchConfig(
        url="http://127.0.0.1:8000",
        workload=SharedPrefixSpec(groups=4, prefix_tokens=1024),
        load=LoadPlan(stages=[Stage(rate=20, num_requests=200)]),
        slo=SLO(ttft_s=0.5),
    )
    result = await run_benchmark(cfg)
"""

from __future__ import annotations

import math
from typing import Any, Literal, Self

from pydantic import Field, ValidationError, model_validator

from infctl.bench.slo import SLO
from infctl.bench.workloads.lengths import Strict
from infctl.bench.workloads.scripts import TextKind
from infctl.bench.workloads.specs import RandomSpec, WorkloadSpec
from infctl.config.router import BaseURL
from infctl.errors import ConfigError

ArrivalKind = Literal["poisson", "gamma", "constant"]


class Stage(Strict):
    """One phase of the load: a request rate (constant or a linear ramp), a concurrency, or the trace's
    own timestamps (neither rate nor concurrency); it ends after ``duration_s`` or ``num_requests``."""

    rate: float | None = Field(default=None, gt=0)
    """Requests per second (``inf``: all at once). With ``rate_end``, the rate at the stage's start."""
    rate_end: float | None = Field(default=None, ge=0)
    """Ramp: the rate at the stage's end, reached linearly over ``duration_s``."""
    concurrency: int | None = Field(default=None, ge=1)
    """Requests kept in flight (closed loop): each finished request is replaced at once."""
    duration_s: float | None = Field(default=None, gt=0)
    num_requests: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give a rate or a concurrency, not both")
        if self.rate_end is not None and (self.rate is None or self.duration_s is None):
            raise ValueError("a ramp (rate_end) needs a start rate and a duration")
        if self.rate is not None and math.isinf(self.rate):
            if self.rate_end is not None:
                raise ValueError("a ramp cannot start at an infinite rate")
            if self.num_requests is None:
                raise ValueError("an infinite rate needs a request count (it would never stop sending)")
        return self

    @property
    def mode(self) -> Literal["rate", "concurrency", "replay"]:
        if self.concurrency is not None:
            return "concurrency"
        return "rate" if self.rate is not None else "replay"

    @property
    def label(self) -> str:
        if self.concurrency is not None:
            what = f"concurrency {self.concurrency}"
        elif self.rate is None:
            what = "trace timestamps"
        elif self.rate_end is not None:
            what = f"{self.rate:g}->{self.rate_end:g} req/s"
        else:
            what = f"{self.rate:g} req/s"
        size = [
            f"{self.duration_s:g}s" if self.duration_s else "",
            f"{self.num_requests} requests" if self.num_requests else "",
        ]
        return f"{what}, {' or '.join(s for s in size if s) or 'until the workload ends'}"

    @property
    def mean_rate(self) -> float | None:
        """The rate this stage asks for on average (None for concurrency and replay)."""
        if self.rate is None:
            return None
        return (self.rate + self.rate_end) / 2 if self.rate_end is not None else self.rate


class LoadPlan(Strict):
    """The stages, run in order, and how arrivals are drawn."""

    stages: list[Stage] = Field(min_length=1)
    arrivals: ArrivalKind = "poisson"
    """Gaps between sends: gamma-distributed (poisson is gamma with shape 1) or constant."""
    burstiness: float = Field(default=1.0, gt=0)
    """Gamma shape: 1 is Poisson, below 1 burstier, above 1 more regular; scale = 1 / (rate * burstiness)."""
    warmup: int = Field(default=0, ge=0)
    """Requests sent (at most 8 at once) and awaited before the measured run; never counted."""
    max_concurrency: int | None = Field(default=None, ge=1)
    """Cap on requests in flight in rate stages (sends wait for a free slot; the wait shows as send lag)."""


class BenchConfig(Strict):
    """One benchmark run."""

    url: BaseURL
    """Base URL of the server (router or engine), e.g. ``http://127.0.0.1:8000``."""
    model: str | None = None
    """Model name sent in each request; None: the first one ``GET /v1/models`` lists."""
    api: Literal["completions", "chat"] = "completions"
    endpoint: str | None = None
    """Path to post to; None: ``/v1/completions`` or ``/v1/chat/completions``."""
    headers: dict[str, str] = Field(default_factory=dict)
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Merged into every request body, last (``{"ignore_eos": true}``)."""
    workload: WorkloadSpec = RandomSpec()
    tokenizer: str | None = None
    """How the synthetic workloads count the prompts they write, so "a prompt of N tokens" is exactly N
    for the served model (``infctl.tokenization.load_tokenizer``: a model directory, ``tokenizer.json``
    or Hugging Face id; ``estimate``; ``words``, the simulator's convention). None: words for English text,
    the estimate for other text. Either way the lengths reported are the server's ``usage`` when it
    sends it."""
    text: TextKind = "en"
    """What the synthetic workloads' prompts are written in: ``en``, ``zh`` (Chinese), ``code`` or
    ``mixed`` (``infctl.bench.workloads.scripts``)."""
    load: LoadPlan
    slo: SLO | None = None
    seed: int = 0
    timeout_s: float = Field(default=600.0, gt=0)
    """Per-request limit, sending to last byte; a request over it fails with class ``timeout``."""
    engine_urls: list[BaseURL] = Field(default_factory=list)
    """Engines to scrape for the server-side view (prefix-cache hits, preemptions, queue peaks)."""
    engine: str | None = None
    """Their engine (an ``infctl.engines`` name); None: detected from each engine's /metrics."""
    sample_interval_s: float = Field(default=0.5, gt=0)
    """How often engine queues are sampled during the run."""
    label: str = ""
    """A name for this run in reports and comparisons."""
    progress_interval_s: float = Field(default=0.25, gt=0)

    @model_validator(mode="after")
    def _check(self) -> Self:
        if self.text != "en" and self.workload.kind in ("trace", "sharegpt"):
            raise ValueError(
                f"text: {self.text} is for the synthetic workloads; a {self.workload.kind} has its own"
            )
        timed = self.workload.kind == "trace"
        for i, stage in enumerate(self.load.stages):
            if stage.mode == "replay" and not timed:
                raise ValueError(
                    f"load.stages[{i}]: give a rate or a concurrency (only a trace has timestamps)"
                )
        return self

    @property
    def request_path(self) -> str:
        if self.endpoint:
            return self.endpoint
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"


def validate_config(data: dict[str, Any]) -> BenchConfig:
    """``BenchConfig.model_validate``; errors become ConfigError naming the path (``load.stages[1].rate``)."""
    try:
        return BenchConfig.model_validate(data)
    except ValidationError as err:
        lines = [f"{_loc(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in err.errors()[:5]]
        raise ConfigError("; ".join(lines), hint="see infctl bench --help") from None


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("random", "mixture", "shared-prefix", "multi-turn", "trace", "sharegpt"):
            continue  # the discriminator's branch name adds nothing for the reader
        else:
            out += f".{part}" if out else str(part)
    return out or "config"
