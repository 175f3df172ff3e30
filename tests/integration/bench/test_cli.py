"""``infctl bench`` and ``infctl bench compare`` as a user runs them, against a simulated engine."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from infctl.cli.main import _register, app

BASE = [
    "--workload",
    "shared-prefix",
    "--groups",
    "2",
    "--prefix-tokens",
    "64",
    "--input-tokens",
    "16",
    "--output-tokens",
    "4",
    "-n",
    "20",
    "--request-rate",
    "200",
    "--seed",
    "1",
]


async def infctl(*args: str, cwd: Path) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "infctl",
        *args,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_run_save_outputs_and_compare(start_sim, runner: CliRunner, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = (await start_sim()).urls[0]
    code, out, err = await infctl(
        "bench",
        "--url",
        url,
        *BASE,
        "--slo",
        "ttft=1s",
        "--engine-url",
        url,
        "--label",
        "base",
        "--save",
        "a.json",
        "--requests-out",
        "r.csv",
        "--html",
        "r.html",
        cwd=tmp_path,
    )
    assert code == 0, err
    assert "TTFT" in out and "goodput" in out and "prefix-cache hit rate" in out and "wrote a.json" in out
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["schema_version"] == 1 and saved["requests"]["completed"] == 20
    assert saved["metadata"]["label"] == "base" and saved["server"]["engines"][0]["engine"] == "vllm"
    assert len((tmp_path / "r.csv").read_text().splitlines()) == 21
    assert (tmp_path / "r.html").read_text().count("<svg") == 6  # TTFT, TPOT, ITL, E2E, requests/s, tokens/s

    code, out, err = await infctl("-o", "json", "bench", "--url", url, *BASE, "--api", "chat", cwd=tmp_path)
    assert code == 0, err
    b = json.loads(out)
    (tmp_path / "b.json").write_text(out)
    assert b["ttft"]["count"] == 20 and "mean_ttft_ms" in b["aliases"]["vllm"]

    result = runner.invoke(
        app, ["-o", "json", "bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    )
    assert result.exit_code == 0, result.output
    deltas = {d["metric"]: d for d in json.loads(result.output)["deltas"]}
    assert deltas["TTFT p50"]["a"] == saved["ttft"]["p50"] and deltas["TTFT p50"]["b"] == b["ttft"]["p50"]
    table = runner.invoke(app, ["bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert table.exit_code == 0 and "TTFT p50" in table.output and "%" in table.output


@pytest.fixture(scope="module")
def runner() -> CliRunner:
    if not any(c.name == "validate" for c in app.registered_commands):
        _register()
    return CliRunner()


def test_errors_are_one_line_with_a_fix(runner: CliRunner, tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [1]}\n{}\n')
    url = "http://127.0.0.1:9"  # never contacted: every error below is found before any request
    cases = [
        (["bench", "--url", url, "--trace", str(trace)], f"{trace}:2: timestamp"),
        (["bench", "--url", url, "--stages", "5:soon"], "--stages"),
        (["bench", "--url", url, "--workload", "shared-prefix", "--groups", "0"], "workload.groups"),
        (["bench", "--url", url, "--request-rate", "5", "--concurrency", "2"], "not both"),
        (["bench", "--url", url, "--find-max"], "--find-max needs objectives"),
        (["bench"], "--url is required"),
        (["bench", "compare", "nope.json", "nope.json"], "cannot read"),
    ]
    for args, message in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output and "fix:" in result.output and "Traceback" not in result.output
    help_text = runner.invoke(app, ["bench", "--help"]).output
    assert "Examples" in help_text and "compare" in help_text


async def test_sweep_json(start_sim, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = (await start_sim()).urls[0]
    code, out, err = await infctl(
        "-o",
        "json",
        "bench",
        "--url",
        url,
        *BASE[:-6],
        "-n",
        "10",
        "--sweep",
        "50,100",
        "--html",
        "s.html",
        cwd=tmp_path,
    )
    assert code == 0, err
    sweep = json.loads(out)
    assert (
        sweep["kind"] == "sweep" and len(sweep["runs"]) == 2 and "<svg" in (tmp_path / "s.html").read_text()
    )


async def test_ctrl_c_keeps_partial_results(start_sim, scrape, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url = (await start_sim()).urls[0]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "infctl",
        "bench",
        "--url",
        url,
        "--duration",
        "60s",
        "--request-rate",
        "20",
        "--input-tokens",
        "16",
        "--output-tokens",
        "4",
        "--save",
        "partial.json",
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    saved = tmp_path / "partial.json"
    # Until the run is under way (the CLI's imports take a while on a busy host): a SIGINT before that
    # would interrupt the imports, not the run.
    async with asyncio.timeout(60):
        while True:
            samples = await scrape(url)
            if sum(v for k, v in samples.items() if k.startswith("vllm:request_success_total")) >= 3:
                break
            await asyncio.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    data = json.loads(saved.read_text())
    assert data["metadata"]["interrupted"] is True and data["requests"]["completed"] > 0
    assert "interrupted" in out.decode()
