"""Command-line forms of bench settings, parsed into typed values (ConfigError on anything unreadable).

* stages: ``5:30s,10:30s`` (rate 5 for 30 s, then 10), ``1-20:60s`` (a ramp), ``c8:100`` (concurrency 8
  for 100 requests); a length is a duration with a unit (``30s``, ``2m``) or a request count (``100``).
* mixture components: ``WEIGHT/INPUT/OUTPUT`` with length distributions, e.g. ``0.8/128/64``,
  ``0.2/normal:4096,512/256``.
* headers: ``Name: value``; extra body: a JSON object.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from infctl.bench.config import Stage
from infctl.bench.slo import parse_duration
from infctl.bench.workloads import LengthDist, MixComponent
from infctl.errors import ConfigError

_STAGE = re.compile(r"^\s*(?:(c)(\d+)|([\d.]+|inf)(?:-([\d.]+))?)\s*:\s*(\S+)\s*$")
_STAGE_HINT = "write e.g. --stages 5:30s,10:30s (rate:duration), 1-20:60s (ramp), c8:100 (concurrency:count)"


def parse_rate(text: str) -> float:
    """A request rate: a positive number or ``inf``."""
    try:
        rate = float(text)
    except ValueError:
        rate = math.nan
    if not rate > 0:
        raise ConfigError(f"rate {text!r}: expected a positive number or inf", hint="e.g. --request-rate 10")
    return rate


def parse_stages(text: str) -> list[Stage]:
    stages = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = _STAGE.match(part)
        if not m:
            raise ConfigError(f"--stages {text}: cannot read {part!r}", hint=_STAGE_HINT)
        conc, rate, rate_end, length = m.group(2), m.group(3), m.group(4), m.group(5)
        size: dict[str, Any] = {}
        if length.isdigit():
            size["num_requests"] = int(length)
        else:
            size["duration_s"] = parse_duration(length, what=f"--stages {part}")
        try:
            if conc:
                stages.append(Stage(concurrency=int(conc), **size))
            else:
                end = float(rate_end) if rate_end is not None else None
                stages.append(Stage(rate=float(rate), rate_end=end, **size))
        except ValueError as e:
            raise ConfigError(f"--stages {part}: {_first_error(e)}", hint=_STAGE_HINT) from None
    if not stages:
        raise ConfigError("--stages is empty", hint=_STAGE_HINT)
    return stages


def parse_mix(items: list[str]) -> list[MixComponent]:
    out = []
    for item in items:
        parts = item.split("/")
        if len(parts) != 3:
            raise ConfigError(
                f"--mix {item}: expected WEIGHT/INPUT/OUTPUT",
                hint="e.g. --mix 0.8/128/64 --mix 0.2/normal:4096,512/256",
            )
        try:
            weight = float(parts[0])
        except ValueError:
            raise ConfigError(f"--mix {item}: weight {parts[0]!r} is not a number", hint="e.g. 0.8") from None
        if weight <= 0:
            raise ConfigError(f"--mix {item}: the weight must be positive", hint="e.g. 0.8")
        inp = LengthDist.parse(parts[1], what=f"--mix {item} input")
        outp = LengthDist.parse(parts[2], what=f"--mix {item} output")
        out.append(MixComponent(name=f"{inp}/{outp}", weight=weight, input=inp, output=outp))
    return out


def parse_headers(items: list[str]) -> dict[str, str]:
    headers = {}
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"--header {item!r}: expected 'Name: value'", hint="e.g. -H 'X-Team: infra'")
        headers[name.strip()] = value.strip()
    return headers


def parse_json_object(text: str, flag: str) -> dict[str, Any]:
    example = f"""e.g. {flag} '{{"ignore_eos": true}}'"""
    try:
        value = json.loads(text)
    except ValueError as e:
        raise ConfigError(f"{flag}: not JSON ({e})", hint=example) from None
    if not isinstance(value, dict):
        raise ConfigError(f"{flag}: expected a JSON object", hint=example)
    return value


def parse_rates(text: str) -> list[float]:
    """``1,2,4,8`` -> rates for ``--sweep``."""
    rates = [parse_rate(p.strip()) for p in text.split(",") if p.strip()]
    if not rates:
        raise ConfigError("--sweep is empty", hint="e.g. --sweep 1,2,4,8")
    return rates


def _first_error(e: ValueError) -> str:
    errors = getattr(e, "errors", None)
    if callable(errors):
        first = errors()[0]
        return str(first.get("msg", e)).removeprefix("Value error, ")
    return str(e)
