"""Helpers of the real-vLLM end-to-end tests (imported by conftest.py and the tests)."""

from __future__ import annotations

import json
import random
import shlex
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infctl.config import ModelProfile
from infctl.engines.cmdline import run_by
from infctl.engines.vllm import ADAPTER
from infctl.tokens import gb2312_level1

REPO = Path(__file__).resolve().parents[2]
DEFAULT_VENV = Path.home() / ".cache" / "infctl" / "vllm-venv"
MODEL_NAME = "tiny"
START_TIMEOUT_S = 420.0
"""Per process; two engines compiling at once on two cores have taken ~2 minutes here."""
ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    # vLLM pins its OpenMP threads to core 0 by default ("auto"); two engines on one machine would share it.
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
}
_PORT_MARK, _HOST_MARK = 59999, "HOST-MARK"


def hanzi(n: int, seed: int) -> str:
    """``n`` Chinese characters drawn evenly from GB2312's 3,755 level-1 (common) hanzi: the tiny model's
    tokenizer makes most of them one token and the rest two (tools/make_tiny_model.py)."""
    rng = random.Random(seed)
    return "".join(rng.choice(_LEVEL1) for _ in range(n))


_LEVEL1 = gb2312_level1()


def tiny_vllm_model(tiny_model: Path, **extra: Any) -> dict[str, Any]:
    """The model section every real-vLLM release here shares (the tiny model, 4,096 positions, prefix
    caching, the engine environment), plus ``extra`` keys (``pd``, ``kv_events``)."""
    return {
        "engine": "vllm",
        "model": str(tiny_model),
        "served_model_name": MODEL_NAME,
        "max_model_len": 4096,
        "enable_prefix_caching": True,
        **extra,
        "env": ENGINE_ENV,
    }


def engine_command(vllm_python: str, model: dict[str, Any]) -> list[str]:
    """The vLLM adapter's own command line, run by the vLLM venv's interpreter: ``local.engine_command`` with
    placeholders, since the profile has no field for "the adapter's command, another python"."""
    argv = ADAPTER.launch_command(ModelProfile(**model), role="both", port=_PORT_MARK, host=_HOST_MARK)
    swap = {str(_PORT_MARK): "{port}", _HOST_MARK: "{host}", MODEL_NAME: "{model}"}
    # Through `env`: infctl's pre-flight resolves symlinks, so a venv's python (a symlink to the same base
    # interpreter) passes for this one and vllm is looked for here (infctl/local/deploy.py _is_this_python).
    return ["env", *run_by([swap.get(word, word) for word in argv], vllm_python)]


def pd_engine_command(vllm_python: str, model: dict[str, Any]) -> list[str]:
    """``local.engine_command`` for a PD release of real vLLM engines: the adapter's command for the engine's
    role (``{role}``: prefill or decode, each with its ``--kv-transfer-config``), with the KV buffer in host
    memory (``kv_buffer_device: cpu``, the CPU platform's default, said explicitly) and run by the vLLM
    venv's interpreter. One command serves every engine of a profile, so ``sh`` picks the role's."""
    cases = []
    for role in ("prefill", "decode"):
        argv = ADAPTER.launch_command(ModelProfile(**model), role=role, port=_PORT_MARK, host=_HOST_MARK)
        at = argv.index("--kv-transfer-config") + 1
        argv[at] = json.dumps({**json.loads(argv[at]), "kv_buffer_device": "cpu"})
        swap = {str(_PORT_MARK): "{port}", _HOST_MARK: "{host}", MODEL_NAME: "{model}"}
        words = run_by([swap.get(word, word) for word in argv], vllm_python)
        cases.append(f"{role}) exec {shlex.join(words)} ;;")
    script = f'case "$1" in {" ".join(cases)} *) echo "no PD role: $1" >&2; exit 2 ;; esac'
    return ["sh", "-c", script, "sh", "{role}"]


def free_port_block(size: int = 20) -> int:
    """A port with ``size`` free ports above it (the supervisor skips taken ones anyway)."""
    for base in range(18600, 30000, size):
        if all(_free(p) for p in range(base, base + size)):
            return base
    raise RuntimeError("no free port block")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass(frozen=True)
class Release:
    name: str
    run_dir: Path
    router_url: str
    engine_urls: tuple[str, ...]
    summary: dict[str, Any]

    def infctl(self, *args: str, timeout: float = 60) -> dict[str, Any]:
        return infctl_json(*args, "--run-dir", str(self.run_dir), timeout=timeout)

    def log_tail(self, process: str, lines: int = 30) -> str:
        """The end of a process's log (``supervisor`` for the supervisor's own)."""
        release_dir = self.run_dir / self.name
        path = (
            release_dir / "supervisor.log"
            if process == "supervisor"
            else release_dir / "logs" / f"{process}.log"
        )
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"({path}: {exc})"


@contextmanager
def deployed(profile: Mapping[str, Any]) -> Iterator[Release]:
    """``profile`` deployed by ``infctl deploy --target local --detach``, then deleted (``infctl delete``),
    whatever happens in between (a failed deploy included). Its ``local.base_port`` (a free block) and
    ``local.run_dir`` are filled in.

    The profile, the run directory and every process's log live in a fresh directory outside pytest's
    temporary ones (which keep only the last three runs), so they stay readable after a failure; its path
    is printed."""
    work = Path(tempfile.mkdtemp(prefix=f"infctl-{profile['name']}-"))
    print(f"\n{profile['name']}: release files in {work}")
    run_dir = work / "run"
    local = {**profile.get("local", {}), "base_port": free_port_block(), "run_dir": str(run_dir)}
    path = work / "profile.yaml"
    path.write_text(yaml.safe_dump({**profile, "local": local}, sort_keys=False))
    try:  # a deploy that fails half way (one engine up, the other not) is deleted too
        summary = infctl_json(
            "deploy", "--target", "local", "-f", str(path), "--detach", "--timeout", str(START_TIMEOUT_S),
            timeout=START_TIMEOUT_S * 3 + 60,
        )  # fmt: skip
        yield Release(
            name=summary["release"],
            run_dir=run_dir,
            router_url=summary["url"],
            engine_urls=tuple(p["url"] for p in summary["processes"] if p["kind"] == "engine"),
            summary=summary,
        )
    finally:
        delete = ["delete", "--release", profile["name"], "--run-dir", str(run_dir)]
        subprocess.run([sys.executable, "-m", "infctl", *delete], cwd=REPO, timeout=120, check=False)


def infctl_json(*args: str, timeout: float) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "infctl", "-o", "json", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"infctl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}\n{proc.stdout}"
        )
    out: dict[str, Any] = json.loads(proc.stdout)
    return out
