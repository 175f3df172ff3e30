"""Saved benchmark results: what a run printed, with the command that made it, its date and its commit.

Every benchmark quoted in docs/benchmarks.md takes ``--save PATH``::

    python benchmarks/bench_metrics_parse.py --save benchmarks/results/01-metrics-parse.json

and any other command is recorded the same way (``infctl demo``, ``infctl simulate compare``)::

    python benchmarks/saved.py record benchmarks/results/10-simulate-compare.json -- infctl simulate compare

then ``python benchmarks/page.py`` writes docs/benchmarks.md from benchmarks/results/. The command runs
unchanged as a child process (same arguments but ``--save``, same environment); its output is passed
through and kept verbatim. A record keeps the title of the file it replaces and nothing else from it: the
old run's figures describe the old run. A summary of the new output, if wanted, goes into its ``figures``.

A record is a JSON object: ``title``, ``command``, ``recorded`` (YYYY-MM-DD, UTC), ``commit`` (short hash),
``dirty`` (the tree had uncommitted changes), ``exit_code``, ``output`` (lines), and optionally ``setup``,
``note``, ``figures`` (markdown), ``command_note``, ``recorded_note``, ``after`` and ``source``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = ("title", "command", "recorded", "commit")
OPTIONAL = ("setup", "note", "figures", "output", "command_note", "recorded_note", "after", "source")
FIELDS = (*REQUIRED, "dirty", "exit_code", *OPTIONAL)


class RecordError(ValueError):
    """A results file that the page cannot be written from."""


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def provenance() -> dict[str, Any]:
    """Today's date (UTC), the checkout's commit, and whether tracked files differ from it."""
    return {
        "recorded": datetime.now(UTC).date().isoformat(),
        "commit": git("rev-parse", "--short=7", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def record(path: Path, argv: list[str], *, shown: list[str], title: str | None = None) -> int:
    """Run ``argv`` with its output passed through, then write its record to ``path`` (``shown`` is the
    command as the record names it). Returns the command's exit status."""
    old = json.loads(path.read_text()) if path.is_file() else {}
    title = title or old.get("title") or shlex.join(shown)
    stamp = provenance()  # taken before the run: the code that ran is the code at its start
    lines: list[str] = []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:
            sys.stdout.write(line)
            lines.append(line.rstrip("\n"))
    saved = {"title": title, "command": shlex.join(shown), **stamp, "exit_code": child.returncode}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**saved, "output": lines}, indent=1, ensure_ascii=False) + "\n")
    print(f"saved: {path}", file=sys.stderr)
    return child.returncode


def save_if_asked() -> None:
    """A benchmark's ``--save PATH``: call it first under ``if __name__ == "__main__":``. Without the flag
    it returns at once; with it, this benchmark runs again without the flag, as a child whose output is
    kept, the record is written (titled as the record it replaces, else by the benchmark's docstring), and
    the process exits with the child's status."""
    args = sys.argv[1:]
    for i, arg in enumerate(args):
        if arg == "--save" and i + 1 < len(args):
            path, rest = args[i + 1], args[:i] + args[i + 2 :]
            break
        if arg.startswith("--save="):
            path, rest = arg.split("=", 1)[1], args[:i] + args[i + 1 :]
            break
    else:
        return
    script = Path(sys.argv[0]).resolve()
    shown = ["python", str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else str(script), *rest]
    old = Path(path).read_text() if Path(path).is_file() else "{}"
    doc = (sys.modules["__main__"].__doc__ or "").strip().split("\n")[0].rstrip(".")
    title = json.loads(old).get("title") or doc or None
    sys.exit(record(Path(path), [sys.executable, str(script), *rest], shown=shown, title=title))


def load(path: Path) -> dict[str, Any]:
    """One record, checked: the fields the page needs, of the types it prints."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RecordError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RecordError(f"{path}: a record is a JSON object")
    missing = [k for k in REQUIRED if not isinstance(data.get(k), str) or not data[k]]
    unknown = sorted(set(data) - set(FIELDS))
    if missing or unknown:
        raise RecordError(f"{path}: missing {missing or 'nothing'}; unknown fields {unknown or 'none'}")
    if not data.get("figures") and not data.get("output"):
        raise RecordError(f"{path}: neither figures nor output: nothing to show")
    if not all(isinstance(line, str) for line in data.get("output", [])):
        raise RecordError(f"{path}: output is a list of lines")
    try:
        datetime.strptime(data["recorded"], "%Y-%m-%d")
    except ValueError:
        raise RecordError(f"{path}: recorded {data['recorded']!r} is not YYYY-MM-DD") from None
    return data


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description="Run a command and save what it printed as a result record.")
    sub = ap.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record", help="run COMMAND, pass its output through, save it to PATH")
    rec.add_argument("path", type=Path)
    rec.add_argument("--title", help="the page's heading (default: the record's at PATH, else the command)")
    rec.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("record needs a command after --")
    return record(args.path, command, shown=command, title=args.title)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
