"""docs/benchmarks.md is written by ``python benchmarks/page.py`` from the saved results in
benchmarks/results/, so it cannot drift from them; a benchmark's ``--save PATH`` (benchmarks/saved.py) keeps
what a run printed with its command, date and commit. Stand-in scripts play the benchmark here: the real
ones take minutes and are never run by tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
RESULTS = BENCH / "results"


@pytest.fixture(scope="module")
def page() -> ModuleType:
    sys.path.insert(0, str(BENCH))  # page.py imports saved.py by name, as `python benchmarks/page.py` does
    try:
        import page as module
    finally:
        sys.path.remove(str(BENCH))
    return module


def run(*argv: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(BENCH)}  # the stand-ins import saved.py as the benchmarks do
    return subprocess.run([sys.executable, *map(str, argv)], cwd=cwd, capture_output=True, text=True, env=env)


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def test_the_committed_page_is_what_the_committed_results_make(page: ModuleType) -> None:
    assert (ROOT / "docs" / "benchmarks.md").read_text() == page.render(RESULTS), (
        "docs/benchmarks.md differs from benchmarks/results/: run python benchmarks/page.py"
    )
    done = run(BENCH / "page.py", "--check")
    assert done.returncode == 0, done.stderr


def test_check_fails_on_a_page_edited_by_hand_and_shows_where(tmp_path: Path) -> None:
    edited = tmp_path / "benchmarks.md"
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    edited.write_text(text.replace("## CLI start-up\n", "## CLI start-up\n\nfaster than ever\n"))
    done = run(BENCH / "page.py", "--check", "--page", edited)
    assert done.returncode == 1
    assert "+faster than ever" not in done.stderr and "-faster than ever" in done.stderr
    assert "python benchmarks/page.py" in done.stderr
    assert run(BENCH / "page.py", "--page", edited).returncode == 0 and edited.read_text() == text


def test_every_figure_names_its_command_date_and_a_commit_of_this_repository(page: ModuleType) -> None:
    shallow = git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
    records = {p.name: page.load(p) for p in sorted(RESULTS.glob("*.json"))}
    assert len(records) >= 10
    for name, r in records.items():
        command = r["command"]
        if command.startswith("python benchmarks/"):
            script = ROOT / command.split()[1]
            assert script.is_file(), (name, command)
            # Every figure on the page can be recorded again with --save.
            assert "save_if_asked()" in script.read_text(), (name, script.name)
        else:
            from infctl.cli.main import COMMANDS

            assert command.split()[0] == "infctl" and command.split()[1] in COMMANDS, (name, command)
        if not shallow:
            assert git("cat-file", "-e", f"{r['commit']}^{{commit}}").returncode == 0, (name, r["commit"])


STAND_IN = '''"""A stand-in benchmark: prints its arguments and a figure."""
import sys

if __name__ == "__main__":
    from saved import save_if_asked

    save_if_asked()
    print("args", *sys.argv[1:])
    print("ratio 1.5x")
    sys.exit(3)
'''


@pytest.mark.parametrize("save", [["--save", "{out}"], ["--save={out}"]])
def test_save_runs_the_benchmark_unchanged_and_keeps_its_output_with_provenance(
    page: ModuleType, tmp_path: Path, save: list[str]
) -> None:
    script = tmp_path / "bench_stand_in.py"
    script.write_text(STAND_IN)
    out = tmp_path / "results" / "01-stand-in.json"
    before = datetime.now(UTC).date().isoformat()
    done = run(script, "--rounds", "2", *[s.format(out=out) for s in save], "--quick")
    assert done.returncode == 3  # the benchmark's own status
    assert done.stdout == "args --rounds 2 --quick\nratio 1.5x\n"  # passed through; --save not given to it
    saved = json.loads(out.read_text())
    assert saved["output"] == ["args --rounds 2 --quick", "ratio 1.5x"]
    assert saved["command"] == f"python {script} --rounds 2 --quick"
    assert saved["title"] == "A stand-in benchmark: prints its arguments and a figure"
    assert saved["commit"] == git("rev-parse", "--short=7", "HEAD").stdout.strip()
    assert saved["recorded"] in {before, datetime.now(UTC).date().isoformat()}
    assert saved["exit_code"] == 3 and isinstance(saved["dirty"], bool)
    section = page.render(out.parent)
    assert (
        "## A stand-in benchmark" in section
        and "```text\nargs --rounds 2 --quick\nratio 1.5x\n```" in section
    )
    assert f"Recorded: {saved['recorded']}, commit {saved['commit']}" in section
    assert "exited with status 3" in section


def test_record_saves_any_command_and_drops_the_old_runs_figures(page: ModuleType, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text(json.dumps({"title": "Kept title", "figures": "old run: 9x", "setup": "old"}))
    done = run(BENCH / "saved.py", "record", out, "--", sys.executable, "-c", "print('new run: 2x')")
    assert done.returncode == 0, done.stderr
    saved = page.load(out)
    assert saved["title"] == "Kept title" and saved["output"] == ["new run: 2x"]
    assert "figures" not in saved and "setup" not in saved
    assert run(BENCH / "saved.py", "record", out).returncode == 2  # no command


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"title": "t", "command": "c", "recorded": "2026-12-01", "figures": "f"}, "missing ['commit']"),
        ({"title": "t", "command": "c", "recorded": "1 Dec", "commit": "abc", "figures": "f"}, "YYYY-MM-DD"),
        ({"title": "t", "command": "c", "recorded": "2026-12-01", "commit": "abc"}, "nothing to show"),
        (
            {"title": "t", "command": "c", "recorded": "2026-12-01", "commit": "a", "figure": "f"},
            "['figure']",
        ),
    ],
)
def test_a_record_the_page_cannot_show_is_refused_by_name(
    page: ModuleType, tmp_path: Path, record: dict[str, str], says: str
) -> None:
    (tmp_path / "07-bad.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match=r"07-bad\.json") as caught:
        page.render(tmp_path)
    assert says in str(caught.value)


def test_stale_lists_a_figure_whose_script_changed_after_it_was_recorded(
    page: ModuleType, tmp_path: Path
) -> None:
    if git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
        pytest.skip("a shallow clone has no history to compare with")
    script = "benchmarks/bench_cli_startup.py"
    born = git("log", "--format=%h", "--diff-filter=A", "--", script).stdout.split()[-1]
    base = {"title": "t", "command": f"python {script}", "recorded": "2026-12-01", "figures": "f"}
    (tmp_path / "01-now.json").write_text(
        json.dumps({**base, "commit": git("rev-parse", "HEAD").stdout.strip()})
    )
    (tmp_path / "02-then.json").write_text(json.dumps({**base, "commit": f"{born}~1"}))
    assert [line.split(":")[0] for line in page.stale(tmp_path)] == ["02-then.json"]
