"""``infctl sim``: run simulated vLLM/SGLang engines (no GPU) until Ctrl-C.

A Typer group whose callback serves when no subcommand is given, so subcommands (``infctl sim calibrate``,
:mod:`infctl.cli.sim_calibrate`) sit beside ``infctl sim --port 8000`` without changing how it works.
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
from infctl.sim.offload import WritePolicy
from infctl.sim.server import SimCluster, serve
from infctl.sim.settings import SERVER_DEV_MODE_ENV, Personality, Role, SimSettings
from infctl.telemetry.kv_events import KV_EVENT_ENCODINGS, KVEventEncoding

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

  [dim]# KV events as older vLLM encoded them (tagged arrays; today's vLLM and vllm-router use maps)[/]
  infctl sim --instances 4 --kv-events-port 5557 --kv-events-encoding array

  [dim]# one vLLM engine serving 2 data-parallel ranks on :8000 (per-rank series in /metrics)[/]
  infctl sim --data-parallel-size 2

  [dim]# prompts counted, cached and published as a real engine serving this model would[/]
  infctl sim --tokenizer Qwen/Qwen3-8B --kv-events-port 5557

  [dim]# a PD pair in one process: prefill on :8100, decode on :8101[/]
  infctl sim --instances 2 --role prefill,decode --port 8100

  [dim]# a small KV cache (preemptions) and injected faults[/]
  infctl sim --num-gpu-blocks 256 --fault error-rate=0.1:503 --fault crash-after=60s

  [dim]# a second KV tier: 64 GiB of host DRAM over PCIe 5 (tier hits in /metrics, CPU KV events)[/]
  infctl sim --kv-offloading-size 64 --kv-offloading-gbps 50

  [dim]# change faults while it runs (GET shows them, DELETE clears them)[/]
  curl -X POST localhost:8000/admin/faults -d '{"specs": ["hang"]}'

  [dim]# vLLM's dev mode: /reset_prefix_cache and /is_sleeping answer (else 404, as vLLM's do)[/]
  VLLM_SERVER_DEV_MODE=1 infctl sim
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
    tokenizer: Annotated[
        str,
        typer.Option(
            help="How prompts become token ids: 'words' (the simulator's whitespace words), or a model "
            "directory, tokenizer.json or Hugging Face id to count, cache and publish prompt tokens as a "
            "real engine serving that model would (usage, /tokenize, KV events); 'estimate'."
        ),
    ] = SimSettings.tokenizer,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="First port (instance i uses port+i); default 8000 vLLM, 30000 SGLang."
        ),
    ] = None,
    instances: Annotated[int, typer.Option(min=1, help="Engines in this process, on consecutive ports.")] = 1,
    data_parallel_size: Annotated[
        int,
        typer.Option(
            min=1,
            help="Data-parallel ranks per engine behind its one port (vLLM --data-parallel-size, SGLang "
            "--dp-size): one /metrics with a series per rank, pins read the engine's way, KV events from "
            "each rank's own port. Not with --role prefill/decode.",
        ),
    ] = 1,
    role: Annotated[
        str, typer.Option(help="PD role: prefill, decode or both; a comma list cycles over the instances.")
    ] = "both",
    time_scale: Annotated[
        float, typer.Option(min=1e-6, help="Wall seconds per simulated second (0.1 = ten times faster).")
    ] = 1.0,
    stream_interval: Annotated[int, typer.Option(min=1, help="Tokens per SSE chunk (vLLM's flag).")] = 1,
    enable_request_id_headers: Annotated[
        bool,
        typer.Option(
            "--enable-request-id-headers",
            help="vLLM's flag: put x-request-id on every answer (the client's, else a new one); without it a "
            "vLLM answer has none.",
        ),
    ] = False,
    kv_events_port: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=65535,
            help="Publish vLLM KV events on ZMQ PUB port+i (off by default); with N data-parallel ranks, "
            "rank r of engine i on port+i*N+r (vLLM's base port + rank).",
        ),
    ] = None,
    kv_events_topic: Annotated[str, typer.Option(help="Topic frame of the KV event messages.")] = "",
    bootstrap_port: Annotated[
        int,
        typer.Option(
            min=1,
            max=65535,
            help="SGLang PD: prefill instance i reports bootstrap port+i (SGLang's "
            "--disaggregation-bootstrap-port; not bound) and a decode request naming that port in its "
            "bootstrap_port meets that instance's prefill of its bootstrap_room.",
        ),
    ] = SimSettings.bootstrap_port,
    nixl_side_channel_port: Annotated[
        int,
        typer.Option(
            min=1,
            max=65535,
            envvar="VLLM_NIXL_SIDE_CHANNEL_PORT",
            help="vLLM PD: instance i reports NIXL side-channel port+i as its prefill answers' remote_port "
            "(vLLM's variable, read the same way; not bound); a decode whose remote_port names an instance "
            "of this process must name its engine id, as vLLM's handshake checks.",
        ),
    ] = SimSettings.nixl_side_channel_port,
    kv_events_encoding: Annotated[
        str,
        typer.Option(
            help="How each KV event is encoded: map (a map tagged under 'type', what vLLM emits today, "
            "the only form vllm-router reads) or array (older vLLM's tagged arrays). "
            "infctl's router reads both."
        ),
    ] = "map",
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
    trust_request_chat_template: Annotated[
        bool,
        typer.Option(
            "--trust-request-chat-template",
            help="vLLM's flag: render a chat request's own chat_template (without it, such a request gets "
            "vLLM's 400).",
        ),
    ] = False,
    server_dev_mode: Annotated[
        bool,
        typer.Option(
            "--server-dev-mode",
            envvar=SERVER_DEV_MODE_ENV,
            help=f"vLLM's dev mode (its variable {SERVER_DEV_MODE_ENV}=1 works too): serve "
            "/reset_prefix_cache and /is_sleeping, which answer 404 without it, as vLLM's do.",
        ),
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
    kv_offloading_size: Annotated[
        float | None,
        typer.Option(
            "--kv-offloading-size",
            "--kv-offload-gib",
            min=0.0,
            help="Second KV tier in host memory, GiB per engine (vLLM's flag; SGLang: --hicache-size). "
            "Prefixes evicted from HBM are loaded back from it instead of recomputed.",
        ),
    ] = None,
    kv_offloading_gbps: Annotated[
        float,
        typer.Option(
            "--kv-offloading-gbps",
            "--kv-offload-gbps",
            min=1e-6,
            help="HBM<->tier bandwidth, GB/s each way (50: PCIe 5.0 x16; a hardware figure, no engine flag).",
        ),
    ] = SimSettings.kv_offloading_gbps,
    kv_offloading_write_policy: Annotated[
        str,
        typer.Option(
            help="write_through: copy every computed block (vLLM, SGLang's default); "
            "write_back: only blocks HBM evicts (SGLang --hicache-write-policy)."
        ),
    ] = "write_through",
) -> None:
    """Run simulated engines until Ctrl-C (SIGINT/SIGTERM stop them cleanly)."""
    if ctx.invoked_subcommand is not None:
        return
    opts = global_options(ctx)
    with errors_as_exit():
        _check_last_port("--port", port, instances)
        _check_last_port("--kv-events-port", kv_events_port, instances * data_parallel_size)
        cfg = SimSettings(
            personality=cast(Personality, _choice("--personality", personality, ("vllm", "sglang"))),
            profile=profile,
            model=model,
            tokenizer=tokenizer,
            host=host,
            port=port,
            instances=instances,
            data_parallel_size=data_parallel_size,
            roles=tuple(
                cast(Role, _choice("--role", r, ("prefill", "decode", "both"))) for r in role.split(",")
            ),
            time_scale=time_scale,
            stream_interval=stream_interval,
            enable_request_id_headers=enable_request_id_headers,
            kv_events_port=kv_events_port,
            kv_events_topic=kv_events_topic,
            bootstrap_port=bootstrap_port,
            nixl_side_channel_port=nixl_side_channel_port,
            kv_events_encoding=cast(
                KVEventEncoding, _choice("--kv-events-encoding", kv_events_encoding, KV_EVENT_ENCODINGS)
            ),
            faults=parse_faults(fault or []),
            legacy_metrics=legacy_metrics,
            trust_request_chat_template=trust_request_chat_template,
            server_dev_mode=server_dev_mode,
            num_gpu_blocks=num_gpu_blocks,
            block_size=block_size,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len,
            enable_prefix_caching=False if no_prefix_caching else None,
            kv_offloading_size=kv_offloading_size,
            kv_offloading_gbps=kv_offloading_gbps,
            kv_offloading_write_policy=cast(
                WritePolicy,
                _choice(
                    "--kv-offloading-write-policy",
                    kv_offloading_write_policy,
                    ("write_through", "write_back"),
                ),
            ),
        )

        def announce(cluster: SimCluster) -> None:
            rows = [
                {"url": inst.url, "model": inst.model, "role": inst.role, "kv_events": inst.kv_endpoint,
                 "data_parallel_size": cfg.data_parallel_size, "tokenizer": cluster.tokenizer.name}
                for inst in cluster.instances
            ]  # fmt: skip
            ranks = f", {cfg.data_parallel_size} DP ranks" if cfg.data_parallel_size > 1 else ""
            if cfg.tokenizer != "words":
                ranks += f", tokenizer {cluster.tokenizer.name}"
            if opts.output is OutputFormat.table:
                for row in rows:
                    kv = f"  kv events {row['kv_events']}" if row["kv_events"] else ""
                    console.print(
                        f"{cfg.personality} sim ({cfg.profile}, role {row['role']}{ranks}) ready: "
                        f"{row['url']}{kv}"
                    )
            else:
                emit(opts, {"instances": rows})

        run(cfg, announce)


def _check_last_port(flag: str, first: int | None, count: int) -> None:
    """Consecutive ports from ``first`` must all exist: 65535 + 1 ended in a traceback from bind()."""
    if first and first + count - 1 > 65535:
        raise ConfigError(
            f"{flag} {first}: {count} consecutive ports run past 65535",
            hint=f"{flag} {65536 - count} or lower, or {flag} 0 for free ports",
        )


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
    from infctl.cli.sim_calibrate import register as add_calibrate  # infctl sim calibrate

    add_calibrate(app)
    root.add_typer(app, name="sim")
