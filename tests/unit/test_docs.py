"""The README is a front door: short, its two commands first, as written; every link inside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)]+)\)")


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 150
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert blocks[:2] == [
        "pip install -e . && infctl demo\n",
        "pip install -e '.[dev]' && python -m pytest\n",
    ]
    for section in ("## Quick tour", "## Deploy to a cluster", "docs/cli.md", "docs/architecture.md"):
        assert section in text
    assert "docs/benchmarks.md" in text and "docs/tokens.md" in text


def test_every_link_stays_in_the_repository() -> None:
    for doc in DOCS:
        text = doc.read_text()
        outside = re.sub(r"```.*?```", "", text, flags=re.S)  # commands may name example URLs
        outside = re.sub(r"`[^`\n]+`", "", outside)  # and so may inline code (settings.md: an engine's URL)
        assert "://" not in outside.replace("http://127.0.0.1", ""), doc.name
        assert "../shared" not in text and "/work/" not in text, doc.name
        for target in LINK.findall(text):
            path = (doc.parent / target.split("#")[0]).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), (doc.name, target)


def test_the_prompt_tokens_section_moved_whole() -> None:
    tokens = (ROOT / "docs" / "tokens.md").read_text()
    assert "| `auto` (default) / `estimate` |" in tokens and "emptyDir" in tokens
