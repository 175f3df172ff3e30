"""``infctl sim``: run simulated vLLM/SGLang engines (no GPU) until Ctrl-C.

A Typer group whose callback serves when no subcommand is given, so ``infctl sim calibrate`` (and other
subcommands) can be added later without changing how ``infctl sim --port 8000`` works.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Annotated, cast

import typer

from infctl.cli.context import OutputFormat, global_options
from infctl.cli.output import console, emit, errors_as_exit
from infctl.errors import ConfigError
from infctl.sim.faults import parse_faults
from infctl.sim.server import SimCluster, serve
from infctl.sim.settings import Personality, Role, SimSettings

app = typer.Typer(
    name="sim",
    help="Run simulated vLLM/SGLang engines: real HTTP, metrics and KV events, modelled timing.",
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)

_EXAMPLES = """
[bold]Examples[/]

  [dim]# one vLLM-like engine on :8000, in real time[/]
  infctl sim

  [dim]# four SGLang engines on :30000-30003, ten times faster, KV events on :5557-5560[/]
  infctl sim --personality sglang --instances 4 --time-scale 0.1 --kv-events-port 5557

  [dim]# a PD pair in one process: prefill on :8100, decode on :8101[/]
  infctl sim --instances 2 --role prefill,decode --port 8100

  [dim]# a small KV cache (preemptions) and injected faults[/]
  infctl sim --num-gpu-blocks 256 --fault error-rate=0.1:503 --fault crash-after=60s

  [dim]# change faults while it runs (GET shows them, DELETE clears them)[/]
  curl -X POST localhost:8000/admin/faults -d '{"specs": ["hang"]}'
"""

_PROFILE = "Profile override"


@app.callback(invoke_without_command=True, epilog=_EXAMPLES)
def sim(
    ctx: typer.Context,
    personality: Annotated[str, typer.Option(help="Engine to imitate: vllm or sglang.")] = "vllm",
    profile: Annotated[
        str, typer.Option(help="Timing/capacity profile (infctl.sim.profiles).")
    ] = "llama3-8b-h100",
    model: Annotated[
        str | None, typer.Option(help="Served model name; default: the profile's model.")
    ] = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help="First port (instance i uses port+i); default 8000 vLLM, 30000 SGLang.")
    ] = None,
    instances: Annotated[int, typer.Option(min=1, help="Engines in this process, on consecutive ports.")] = 1,
    role: Annotated[
        str, typer.Option(help="PD role: prefill, decode or both; a comma list cycles over the instances.")
    ] = "both",
    time_scale: Annotated[
        float, typer.Option(min=1e-6, help="Wall seconds per simulated second (0.1 = ten times faster).")
    ] = 1.0,
    stream_interval: Annotated[int, typer.Option(min=1, help="Tokens per SSE chunk (vLLM's flag).")] = 1,
    kv_events_port: Annotated[
        int | None, typer.Option(help="Publish vLLM KV events on ZMQ PUB port+i (off by default).")
    ] = None,
    kv_events_topic: Annotated[str, typer.Option(help="Topic frame of the KV event messages.")] = "",
    fault: Annotated[
        list[str] | None,
        typer.Option(
            help="Inject a fault (repeatable): crash-after=30s, error-rate=0.2:503, slowdown=3, hang, "
            "disconnect-after=5, health=fail."
        ),
    ] = None,
    legacy_metrics: Annotated[
        bool,
        typer.Option("--legacy-metrics", help="Also expose deprecated vLLM metric names (doctor tests)."),
    ] = False,
    num_gpu_blocks: Annotated[int | None, typer.Option(min=1, help=f"{_PROFILE}: KV blocks.")] = None,
    block_size: Annotated[int | None, typer.Option(min=1, help=f"{_PROFILE}: tokens per KV block.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(min=1, help=f"{_PROFILE}: sequences per batch.")] = None,
    max_num_batched_tokens: Annotated[
        int | None, typer.Option(min=1, help=f"{_PROFILE}: token budget of one step.")
    ] = None,
    max_model_len: Annotated[int | None, typer.Option(min=1, help=f"{_PROFILE}: context length.")] = None,
    no_prefix_caching: Annotated[
        bool, typer.Option("--no-prefix-caching", help=f"{_PROFILE}: disable the prefix cache.")
    ] = False,
) -> None:
    """Run simulated engines until Ctrl-C (SIGINT/SIGTERM stop them cleanly)."""
    if ctx.invoked_subcommand is not None:
        return
    opts = global_options(ctx)
    with errors_as_exit():
        cfg = SimSettings(
            personality=cast(Personality, _choice("--personality", personality, ("vllm", "sglang"))),
            profile=profile,
            model=model,
            host=host,
            port=port,
            instances=instances,
            roles=tuple(
                cast(Role, _choice("--role", r, ("prefill", "decode", "both"))) for r in role.split(",")
            ),
            time_scale=time_scale,
            stream_interval=stream_interval,
            kv_events_port=kv_events_port,
            kv_events_topic=kv_events_topic,
            faults=parse_faults(fault or []),
            legacy_metrics=legacy_metrics,
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            enable_prefix_caching=False if no_prefix_caching else None,
        )

        def announce(cluster: SimCluster) -> None:
            rows = [
                {"url": inst.url, "model": inst.model, "role": inst.role, "kv_events": inst.kv_endpoint}
                for inst in cluster.instances
            ]
            if opts.output is OutputFormat.table:
                for row in rows:
                    kv = f"  kv events {row['kv_events']}" if row["kv_events"] else ""
                    console.print(
                        f"{cfg.personality} sim ({cfg.profile}, role {row['role']}) ready: {row['url']}{kv}"
                    )
            else:
                emit(opts, {"instances": rows})

        run(cfg, announce)


def _choice(flag: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(
            f"{flag} {value!r} is not one of {', '.join(allowed)}", hint=f"use {flag} {allowed[0]}"
        )
    return value


def run(cfg: SimSettings, on_ready: Callable[[SimCluster], None] | None = None) -> None:
    """The sync wrapper: owns the event loop; SIGINT/SIGTERM end ``serve`` cleanly."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await serve(cfg, stop=stop, on_ready=on_ready)

    asyncio.run(main())


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="sim")
