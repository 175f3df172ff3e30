"""docs/settings.md is what the settings models say (regenerate: python -m infctl.config.reference)."""

from __future__ import annotations

from pathlib import Path

from infctl.config.reference import page
from infctl.config.router import RouterOptions

DOC = Path(__file__).parents[3] / "docs" / "settings.md"


def test_the_settings_page_is_written_from_the_models() -> None:
    assert DOC.read_text() == page(), "run: python -m infctl.config.reference > docs/settings.md"


def test_the_page_lists_every_router_setting_with_its_default() -> None:
    text = page()
    for name in RouterOptions.model_fields:
        assert f"| `{name}` |" in text, name
    assert "| `admission_queue` | `1024` |" in text and "| `health.failures_to_eject` | `3` |" in text
    assert "| `targets[].min` | required |" in text
