"""vLLM runs as ``vllm serve``: the program that honours ``--headless`` (a multi-node worker starts engine
cores only, no API server of its own), as the official image's entrypoint does; the local target runs the
same command with its own interpreter."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from infctl.config import ModelProfile
from infctl.engines import get_adapter
from infctl.engines.cmdline import CONSOLE_SCRIPTS, RUN_MODULE, python_module, run_by
from infctl.engines.vllm_launch import PROGRAM

VENV = Path.home() / ".cache" / "infctl" / "vllm-venv"
VLLM_SOURCE = sorted(VENV.glob("lib/python3*/site-packages/vllm"))
"""The installed vLLM (the CI's slow stage and dev machines have it)."""


def worker_command(tp: int) -> list[str]:
    """A LeaderWorkerSet worker's words as the pod runs them (``sh -c "exec <argv> <suffix>"``)."""
    model = ModelProfile(engine="vllm", model="org/model", tensor_parallel_size=tp, data_parallel_size=16)
    vllm = get_adapter("vllm")
    extra = vllm.multinode_args(model, nodes=2, gpus_per_node=8, leader=False)
    argv = vllm.launch_command(model, role="both", port=8000) + list(extra.args)
    return shlex.split(shlex.join(argv) + " " + extra.shell_suffix)


@pytest.mark.parametrize("tp", [1, 16], ids=["data-parallel ranks per node", "tensor parallel over nodes"])
def test_a_multi_node_worker_runs_vllm_serve_headless(tp: int) -> None:
    words = worker_command(tp)
    assert words[:3] == ["vllm", "serve", "org/model"]
    assert "--headless" in words and "--model" not in words


def test_the_local_target_runs_the_console_script_s_module_with_its_interpreter() -> None:
    argv = [*PROGRAM, "org/model", "--port", "1"]
    assert run_by(argv, "/venv/bin/python") == [
        "/venv/bin/python", "-c", RUN_MODULE, "vllm.entrypoints.cli.main", "serve", "org/model", "--port", "1"
    ]  # fmt: skip
    assert python_module(run_by(argv, "/py")) == "vllm.entrypoints.cli.main"
    assert run_by(["python3", "-m", "sglang.launch_server"], "/py") == ["/py", "-m", "sglang.launch_server"]
    assert python_module(["/py", "-m", "sglang.launch_server"]) == "sglang.launch_server"
    assert run_by(["toyserve", "--model", "m"], "/py") == ["toyserve", "--model", "m"]
    assert python_module(["toyserve", "--model", "m"]) is None


def test_run_module_runs_the_module_as_main_with_the_rest_as_its_arguments(tmp_path: Path) -> None:
    (tmp_path / "echo_argv.py").write_text(
        "import sys\nif __name__ == '__main__':\n    print(sys.argv[1:])\n"
    )
    argv = [sys.executable, "-c", RUN_MODULE, "echo_argv", "serve", "--port", "1"]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "['serve', '--port', '1']"


@pytest.mark.skipif(not VLLM_SOURCE, reason="no vLLM installed at ~/.cache/infctl/vllm-venv")
def test_the_installed_vllm_honours_headless_in_serve_only() -> None:
    src = VLLM_SOURCE[-1]
    serve = (src / "entrypoints" / "cli" / "serve.py").read_text()
    assert "if args.headless:" in serve and "run_headless(args)" in serve
    # The deprecated `python -m vllm.entrypoints.openai.api_server` runs one API server, headless or not.
    entry = (src / "entrypoints" / "launchers" / "api_server" / "entry.py").read_text()
    assert "headless" not in entry.partition("def main(")[2]
    # The `vllm` console script calls the module the local target runs.
    script = (VENV / "bin" / PROGRAM[0]).read_text()
    assert f"from {CONSOLE_SCRIPTS[PROGRAM[0]]} import main" in script
