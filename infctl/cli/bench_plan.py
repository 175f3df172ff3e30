"""Flags of ``infctl bench`` (and ``infctl simulate``) turned into the ``workload`` and ``load`` sections of a
bench config; conflicting or missing flags raise ConfigError naming them."""

from __future__ import annotations

from typing import Any

from infctl.bench.flags import parse_mix, parse_rate, parse_stages
from infctl.bench.slo import parse_duration
from infctl.bench.workloads import WORKLOAD_KINDS, LengthDist
from infctl.errors import ConfigError


def workload_kind(workload: str | None, *, trace: object, dataset: object, mix: list[str] | None) -> str:
    """``--workload`` as given, else the kind its file flags imply: ``--trace`` a trace, ``--dataset``
    ShareGPT, ``--mix`` a mixture; random with none of them."""
    if workload:
        return workload
    return "trace" if trace else "sharegpt" if dataset else "mixture" if mix else "random"


def workload_spec(kind: str, inp: str, out: str, mix: list[str] | None, o: dict[str, Any]) -> dict[str, Any]:
    """The ``workload`` section for ``--workload KIND``: ``inp``/``out`` are the length flags, ``mix`` the
    ``--mix`` components, ``o`` the other workload flags by parameter name."""
    i, p = LengthDist.parse(inp, what="--input-tokens"), LengthDist.parse(out, what="--output-tokens")
    if kind == "random":
        return {"kind": kind, "input": i, "output": p}
    if kind == "mixture":
        if not mix:
            raise ConfigError(
                "--workload mixture needs components", hint="add e.g. --mix 0.8/128/64 --mix 0.2/4096/256"
            )
        return {"kind": kind, "components": parse_mix(mix)}
    if kind == "shared-prefix":
        return {"kind": kind, "groups": o["groups"], "prefix_tokens": o["prefix_tokens"], "zipf": o["zipf"],
                "input": i, "output": p}  # fmt: skip
    if kind == "multi-turn":
        return {"kind": kind, "conversations": o["conversations"], "turns": o["turns"],
                "system_tokens": o["system_tokens"], "input": i, "output": p}  # fmt: skip
    if kind == "trace":
        if o["trace"] is None:
            raise ConfigError(
                "--workload trace needs a file", hint="add --trace FILE.jsonl (Mooncake format)"
            )
        return {"kind": kind, "path": o["trace"], "time_compression": o["time_compression"],
                "input_scale": o["input_scale"], "output_scale": o["output_scale"],
                "block_size": o["trace_block_size"], "max_input_tokens": o["max_input_tokens"]}  # fmt: skip
    if kind == "sharegpt":
        if o["dataset"] is None:
            raise ConfigError(
                "--workload sharegpt needs a file", hint="add --dataset FILE.json (ShareGPT format)"
            )
        spec: dict[str, Any] = {"kind": kind, "path": o["dataset"]}
        if o["max_input_tokens"]:
            spec["max_input_tokens"] = o["max_input_tokens"]
            spec["max_total_tokens"] = max(2048, o["max_input_tokens"] * 2)
        return spec
    raise ConfigError(
        f"--workload {kind!r} is not one of {', '.join(WORKLOAD_KINDS)}", hint="e.g. --workload random"
    )


def load_plan(
    kind: str, n: int | None, duration: str | None, rate: str | None, conc: int | None, stages: str | None,
    arrivals: str, burstiness: float, warmup: int, max_conc: int | None,
) -> dict[str, Any]:  # fmt: skip
    """The ``load`` section: ``--stages``, or one stage from -n/--duration and --request-rate/--concurrency
    (a trace with neither replays at its own pace)."""
    counts = (
        ("-n", n, 1),
        ("--concurrency", conc, 1),
        ("--max-concurrency", max_conc, 1),
        ("--warmup", warmup, 0),
    )
    for flag, value, least in counts:  # 0 read as "not given" would quietly run the default instead
        if value is not None and value < least:
            raise ConfigError(
                f"{flag} {value}: expected an integer >= {least}",
                hint=f"give {flag} {least} or more, or leave it out",
            )
    plan: dict[str, Any] = {"arrivals": arrivals, "burstiness": burstiness, "warmup": warmup,
                            "max_concurrency": max_conc}  # fmt: skip
    if stages:
        if rate or conc or n or duration:
            raise ConfigError(
                "--stages replaces --request-rate/--concurrency/-n/--duration", hint="give one or the other"
            )
        plan["stages"] = parse_stages(stages)
        return plan
    if rate and conc:
        raise ConfigError("give --request-rate or --concurrency, not both", hint="drop one of them")
    stage: dict[str, Any] = {}
    if duration:
        stage["duration_s"] = parse_duration(duration, what="--duration")
    if n:
        stage["num_requests"] = n
    if not stage and kind != "trace":
        stage["num_requests"] = 100
    if duration and not (rate or conc or n) and kind != "trace":
        raise ConfigError(
            "--duration needs a pace: at the default infinite rate it would send without end",
            hint="add --request-rate R or --concurrency C",
        )
    if conc:
        stage["concurrency"] = conc
    elif rate or kind != "trace":
        stage["rate"] = parse_rate(rate or "inf")
    plan["stages"] = [stage]
    return plan
