"""The flags of ``infctl simulate run``, one ``Annotated`` type each, grouped as ``--help`` shows them.

The command's signature stays one line per flag (``engines: o.Engines = None``); the declarations, help
texts and panels live here. Workload and load flags mirror ``infctl bench``'s (same names, same meaning),
so a scenario that runs on the simulator also runs against a live stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infctl.bench.workloads import WORKLOAD_KINDS

FLEET, WORKLOAD, LOAD, AUTOSCALER, OUTPUT = "Fleet and router", "Workload", "Load", "Autoscaler", "Output"
PD_ADMISSION = "Disaggregation and admission"


# -- Fleet and router ------------------------------------------------------------------------------------
Engines = Annotated[
    int | None,
    typer.Option(
        min=1, help="Engines at the start (default 4; with --pd: the layout's).", rich_help_panel=FLEET
    ),
]
Profile = Annotated[
    str, typer.Option(help="Engine profile (infctl.sim.profiles) or a profile file.", rich_help_panel=FLEET)
]
Policy = Annotated[
    str,
    typer.Option(
        help="Routing preset (cache_aware, round_robin, ...) or a policy JSON object.", rich_help_panel=FLEET
    ),
]
ScrapeInterval = Annotated[
    str, typer.Option(help="How often the router refreshes engine signals.", rich_help_panel=FLEET)
]
KvEvents = Annotated[
    bool,
    typer.Option(
        "--kv-events/--no-kv-events",
        help="Engines publish KV events and the router routes on them (its precise prefix index).",
        rich_help_panel=FLEET,
    ),
]
GpusPerEngine = Annotated[int, typer.Option(min=1, help="For GPU-hours.", rich_help_panel=FLEET)]
MaxTime = Annotated[
    str | None, typer.Option(help="Stop the virtual clock here (e.g. 2h).", rich_help_panel=FLEET)
]

# -- Workload --------------------------------------------------------------------------------------------
Workload = Annotated[str | None, typer.Option(help=f"{', '.join(WORKLOAD_KINDS)}.", rich_help_panel=WORKLOAD)]
InputTokens = Annotated[
    str, typer.Option(help="Prompt tokens: 512, normal:512,64...", rich_help_panel=WORKLOAD)
]
OutputTokens = Annotated[str, typer.Option(help="Output tokens, same forms.", rich_help_panel=WORKLOAD)]
Mix = Annotated[
    list[str] | None, typer.Option(help="mixture: WEIGHT/INPUT/OUTPUT.", rich_help_panel=WORKLOAD)
]
Groups = Annotated[int, typer.Option(help="shared-prefix: prefix groups.", rich_help_panel=WORKLOAD)]
PrefixTokens = Annotated[int, typer.Option(help="shared-prefix: prefix tokens.", rich_help_panel=WORKLOAD)]
Zipf = Annotated[float, typer.Option(help="shared-prefix: popularity exponent.", rich_help_panel=WORKLOAD)]
Conversations = Annotated[int, typer.Option(help="multi-turn: open at once.", rich_help_panel=WORKLOAD)]
Turns = Annotated[int, typer.Option(help="multi-turn: turns each.", rich_help_panel=WORKLOAD)]
SystemTokens = Annotated[int, typer.Option(help="multi-turn: system prompt.", rich_help_panel=WORKLOAD)]
Trace = Annotated[
    Path | None,
    typer.Option(help="Mooncake-format trace (implies --workload trace).", rich_help_panel=WORKLOAD),
]
TimeScale = Annotated[
    float,
    typer.Option(
        "--time-compression",
        "--trace-speedup",
        help="trace: replay this many times faster.",
        rich_help_panel=WORKLOAD,
    ),
]
InputScale = Annotated[float, typer.Option(help="trace: scale every prompt.", rich_help_panel=WORKLOAD)]
OutputScale = Annotated[float, typer.Option(help="trace: scale every output.", rich_help_panel=WORKLOAD)]
TraceBlockSize = Annotated[int, typer.Option(help="trace: tokens per hash id.", rich_help_panel=WORKLOAD)]
MaxInputTokens = Annotated[
    int | None, typer.Option(help="trace: cut longer prompts to this.", rich_help_panel=WORKLOAD)
]
Dataset = Annotated[Path | None, typer.Option(help="ShareGPT-format file.", rich_help_panel=WORKLOAD)]

# -- Load ------------------------------------------------------------------------------------------------
NumRequests = Annotated[
    int | None, typer.Option("-n", "--num-requests", help="Requests (default 100).", rich_help_panel=LOAD)
]
Duration = Annotated[str | None, typer.Option(help="Or send for this long.", rich_help_panel=LOAD)]
RequestRate = Annotated[str | None, typer.Option(help="Requests/s (default inf).", rich_help_panel=LOAD)]
Concurrency = Annotated[int | None, typer.Option(help="Or keep this many in flight.", rich_help_panel=LOAD)]
Arrivals = Annotated[str, typer.Option(help="poisson, gamma or constant.", rich_help_panel=LOAD)]
Burstiness = Annotated[float, typer.Option(help="Gamma shape.", rich_help_panel=LOAD)]
Stages = Annotated[str | None, typer.Option(help="5:30s,10:30s | 1-20:60s | c8:100.", rich_help_panel=LOAD)]
Slo = Annotated[str | None, typer.Option(help="Goodput objectives: ttft=2s,tpot=50ms.", rich_help_panel=LOAD)]
Seed = Annotated[int, typer.Option(help="Workload and arrival seed.", rich_help_panel=LOAD)]

# -- Autoscaler ------------------------------------------------------------------------------------------
Autoscale = Annotated[bool, typer.Option(help="Run the autoscaler's policy.", rich_help_panel=AUTOSCALER)]
MinEngines = Annotated[int, typer.Option(min=1, help="Fewest engines.", rich_help_panel=AUTOSCALER)]
MaxEngines = Annotated[int, typer.Option(min=1, help="Most engines.", rich_help_panel=AUTOSCALER)]
ScaleInterval = Annotated[str, typer.Option(help="Between decisions.", rich_help_panel=AUTOSCALER)]
Startup = Annotated[str, typer.Option(help="Ask to serving, per engine.", rich_help_panel=AUTOSCALER)]
QueueUp = Annotated[float, typer.Option(help="Scale up above this queue/engine.", rich_help_panel=AUTOSCALER)]
DownWindow = Annotated[
    str, typer.Option(help="Low this long before a scale-down.", rich_help_panel=AUTOSCALER)
]
TtftSlo = Annotated[
    str | None, typer.Option(help="Scale up while TTFT p99 exceeds it.", rich_help_panel=AUTOSCALER)
]

# -- Disaggregation and admission ------------------------------------------------------------------------
Pd = Annotated[
    str | None,
    typer.Option(
        help="Disaggregate: each group has x prefill and y decode engines (1P1D, 2P1D...).",
        rich_help_panel=PD_ADMISSION,
    ),
]
PdGroups = Annotated[
    int, typer.Option(min=1, help="PD groups (one switch each).", rich_help_panel=PD_ADMISSION)
]
PdMode = Annotated[
    str,
    typer.Option(
        help="group: pair inside a group; pool: any prefill with any decode.", rich_help_panel=PD_ADMISSION
    ),
]
PdMinUncachedTokens = Annotated[
    int,
    typer.Option(
        min=0, help="Shorter uncached prompts prefill on the decode engine.", rich_help_panel=PD_ADMISSION
    ),
]
IntraGroupGbps = Annotated[
    float | None,
    typer.Option(help="KV link in a group, GB/s (default: the profile's).", rich_help_panel=PD_ADMISSION),
]
CrossGroupGbps = Annotated[
    float | None,
    typer.Option(help="KV link between groups, GB/s (default: half).", rich_help_panel=PD_ADMISSION),
]
AdmissionQueue = Annotated[
    int | None,
    typer.Option(
        min=1, help="Hold up to N requests while every engine is saturated.", rich_help_panel=PD_ADMISSION
    ),
]
AdmissionDeadline = Annotated[
    str, typer.Option(help="Longest wait in that queue before a 429.", rich_help_panel=PD_ADMISSION)
]
ShortPromptTokens = Annotated[
    int,
    typer.Option(min=0, help="Prompts up to this long leave the queue first.", rich_help_panel=PD_ADMISSION),
]

# -- Output ----------------------------------------------------------------------------------------------
Label = Annotated[str | None, typer.Option(help="Name of this run in reports.", rich_help_panel=OUTPUT)]
Save = Annotated[
    Path | None, typer.Option(help="Write the result (bench JSON schema).", rich_help_panel=OUTPUT)
]
RequestsOut = Annotated[
    Path | None, typer.Option(help="Per-request rows: FILE.jsonl or FILE.csv.", rich_help_panel=OUTPUT)
]
