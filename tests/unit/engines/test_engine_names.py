"""Engine names live in ``infctl.engines`` (and the simulator that imitates them): every other package reads
them from the registry, so a third engine touches one package."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

from infctl.engines import DEFAULT_ENGINE, ENGINES, Engine

PACKAGE = Path(__file__).resolve().parents[3] / "infctl"
HOME = ("engines", "sim")
"""Where engine names belong: the adapters, and the simulator's personalities of them."""
NOT_ENGINES = {
    "bench/result.py": "the result-file format of vLLM's benchmark tool (vllm bench serve), not an engine",
    "cli/sim.py": "the simulator's --personality choices (infctl sim)",
}
ENGINE_MODULES = frozenset(f"infctl.engines.{m}" for m in ("vllm", "sglang", "vllm_launch", "sglang_launch"))
"""One engine's own modules: everything else goes through the registry and the adapter."""


def outside_home() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] not in HOME]


def test_the_typing_alias_and_the_default_match_the_registry() -> None:
    assert set(get_args(Engine)) == set(ENGINES)
    assert DEFAULT_ENGINE in ENGINES


def test_no_engine_name_is_spelled_outside_the_adapters() -> None:
    spelled = []
    for path in outside_home():
        if path.relative_to(PACKAGE).as_posix() in NOT_ENGINES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in ENGINES:
                spelled.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}")
    assert spelled == []


def test_no_package_reaches_into_one_engines_module() -> None:
    reached = []
    for path in outside_home():
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            reached += [
                f"{path.relative_to(PACKAGE)}:{node.lineno}: {n}" for n in names if n in ENGINE_MODULES
            ]
    assert reached == []
