"""The README's shell commands, as written: its fenced ``bash`` blocks and the commands in them.

    python tools/readme_commands.py demo    # the block marked <!-- ci: demo --> in README.md, verbatim
    python tools/readme_commands.py tests   # the block marked <!-- ci: tests -->

CI runs what this prints (``.ci/run``: the two commands a new user runs first), and
tests/unit/test_readme_commands.py checks every ``infctl`` command in the README against the real CLI, so
the README cannot drift from what works. A marker is an HTML comment on the line before a block: invisible
where the README is rendered, and independent of the block's place or its section's heading.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
MARKED = re.compile(r"^<!--\s*ci:\s*([\w-]+)\s*-->\n```bash\n(.*?)^```", re.S | re.M)
BLOCK = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
SEPARATORS = {"&&", "||", ";", "|"}


def marked_blocks(text: str) -> dict[str, str]:
    """The ``bash`` blocks carrying a ``<!-- ci: NAME -->`` marker, by name; a name used twice is an error."""
    found: dict[str, str] = {}
    for name, body in MARKED.findall(text):
        if name in found:
            raise ValueError(f"README marker ci: {name} is used twice")
        found[name] = body
    return found


def blocks(text: str) -> list[str]:
    """Every ``bash`` block's text, in order."""
    return BLOCK.findall(text)


def commands(block: str) -> list[list[str]]:
    """The simple commands in a block, each as its argv: continuation lines joined, ``# comments`` dropped,
    lists split at ``&&``, ``||``, ``;`` and ``|``."""
    out: list[list[str]] = []
    for line in block.replace("\\\n", " ").splitlines():
        current: list[str] = []
        for word in shlex.split(line, comments=True):
            if word in SEPARATORS:
                out.append(current)
                current = []
            else:
                current.append(word)
        out.append(current)
    return [argv for argv in out if argv]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: readme_commands.py NAME  (a <!-- ci: NAME --> marker in README.md)", file=sys.stderr)
        return 2
    marked = marked_blocks(README.read_text())
    if argv[0] not in marked:
        names = ", ".join(sorted(marked)) or "none"
        print(f"README.md has no block marked <!-- ci: {argv[0]} --> (markers: {names})", file=sys.stderr)
        return 2
    print(marked[argv[0]], end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
