"""Write docs/benchmarks.md from the saved results in benchmarks/results/ (one JSON record per figure).

    python benchmarks/page.py            # rewrite docs/benchmarks.md
    python benchmarks/page.py --check    # exit 1 if docs/benchmarks.md is not what the results make
    python benchmarks/page.py --stale    # which figures' benchmark scripts changed since they were recorded

Each figure carries the command that produced it, its date and its commit, so a figure cannot quietly
outlive the code that made it; tests/unit/test_benchmarks_page.py keeps the committed page equal to what
this writes from the committed results. Records are shown in file-name order; how to save one:
benchmarks/saved.py.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Any

from saved import ROOT, git, load

RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"
INTRO = """\
# Benchmarks: the figures and the commands that make them

<!-- Written by `python benchmarks/page.py` from benchmarks/results/*.json: edit those, not this page. -->

Measured on the development machine (2 cores, shared with other jobs, so noisy); each ratio is from one run
unless the row says otherwise. Each figure names the commit that recorded it and its date: a figure older
than the code it describes may be stale, so re-run its command before quoting it. Benchmarks print ratios
measured side by side in one run; take `flock /tmp/infctl-bench.lock` when others share the machine.

To record a figure, run its command with `--save benchmarks/results/NAME.json` (any other command:
`python benchmarks/saved.py record benchmarks/results/NAME.json -- COMMAND`), then
`python benchmarks/page.py`.
"""


def section(r: dict[str, Any]) -> str:
    parts = [f"## {r['title']}"]
    if r.get("setup"):
        parts.append(f"Setup: {r['setup']}")
    if r.get("note"):
        parts.append(r["note"])
    if r.get("figures"):
        parts.append(r["figures"])
    if r.get("output"):
        lead = "As it printed:\n\n" if r.get("figures") else ""
        parts.append(lead + "```text\n" + "\n".join(r["output"]) + "\n```")
    command = f"Command: `{r['command']}`" + (f" {r['command_note']}" if r.get("command_note") else "")
    when = f"Recorded: {r['recorded']}, commit {r['commit']}"
    notes = [n for n in ("with uncommitted changes" if r.get("dirty") else "", r.get("recorded_note")) if n]
    when += f" ({'; '.join(notes)})." if notes else "."
    if r.get("exit_code"):
        when += f" The command exited with status {r['exit_code']}."
    parts.append(f"{command}  \n{when}")
    if r.get("after"):
        parts.append(r["after"])
    return "\n\n".join(parts) + "\n"


def render(results: Path = RESULTS) -> str:
    """The page, from every ``*.json`` record in ``results`` in file-name order."""
    records = [load(p) for p in sorted(results.glob("*.json"))]
    return "\n".join([INTRO, *(section(r) for r in records)])


def stale(results: Path = RESULTS) -> list[str]:
    """One line per figure whose ``python benchmarks/X.py`` changed after the commit that recorded it."""
    lines = []
    for path in sorted(results.glob("*.json")):
        r = load(path)
        words = r["command"].split()
        if words[0] != "python" or not (ROOT / words[1]).is_file():
            continue
        changes = git("rev-list", "--count", f"{r['commit']}..HEAD", "--", words[1])
        if changes != "0":
            lines.append(f"{path.name}: {words[1]} changed in {changes} commits since {r['commit']}")
    return lines


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    ap.add_argument("--stale", action="store_true", help="list figures whose script changed since recorded")
    ap.add_argument("--results", type=Path, default=RESULTS, help="the records' directory")
    ap.add_argument("--page", type=Path, default=PAGE, help="the page to write or check")
    args = ap.parse_args(argv)
    if args.stale:
        print("\n".join(stale(args.results)) or "no figure's script changed since it was recorded")
        return 0
    text = render(args.results)
    if not args.check:
        args.page.write_text(text)
        print(f"wrote {args.page}")
        return 0
    current = args.page.read_text() if args.page.is_file() else ""
    if current == text:
        return 0
    diff = difflib.unified_diff(
        current.splitlines(), text.splitlines(), str(args.page), "benchmarks/page.py", lineterm=""
    )
    print("\n".join(diff), file=sys.stderr)
    print(
        f"{args.page} is not what the saved results make: run python benchmarks/page.py and commit the page",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
